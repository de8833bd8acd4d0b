package kgolog

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// New is a kgo logger passing the client's warnings and errors to log,
// each message prefixed "kafka client: ". kgo's info and debug messages
// are not asked for.
func New(log *slog.Logger) kgo.Logger { return &logger{log: log} }

// logger is New's kgo.Logger.
type logger struct{ log *slog.Logger }

func (*logger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l *logger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelWarn
	if level == kgo.LogLevelError {
		lv = slog.LevelError
	}
	l.log.Log(context.Background(), lv, "kafka client: "+msg, keyvals...)
}
