package producer

import (
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Logger is a kgo logger passing the client's warnings and errors to log,
// for the other kgo clients of the module (the inbox's consumer and
// dead-letter writer).
func Logger(log *slog.Logger) kgo.Logger { return &logger{log: log} }
