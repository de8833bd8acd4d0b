package streamlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"syscall"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/logs"
)

// The stream client's log lines that a clean Close provokes. Its
// Client.Close writes the protocol's close request and shuts the socket
// without waiting for the answer; the connection's reader may then take
// the server's answer for a close request of the server's own and try to
// acknowledge it on the socket just shut ("Error handling command
// response: … use of closed network connection - details: Socket write
// buffer closeFrameHandler"), and a close request written after the
// server dropped the connection fails with a broken pipe ("error during
// Send client close …"). Nothing is lost in either: the connection was
// being closed.
const (
	closeAnswerFormat  = "Error handling command response: %s - details: %s"
	closeAnswerDetails = "Socket write buffer closeFrameHandler"
	closeRequestFormat = "error during Send client close %s"
)

// The stream client logs through log/slog's default logger in every
// process that links this package (the relay's RabbitMQ sink and the
// inbox's RabbitMQ loop import it): its errors and warnings at those
// levels, its information and debugging lines at debug level, and the
// lines a clean Close provokes at debug level. The client's logger is a
// plain variable, one per process, that its connections' goroutines read
// as they log; it is set at init, before any of them runs (set from New,
// it raced with the connections a process had opened before).
func init() { logs.SetLogger(clientLogger{}) }

// clientLogger is the stream client's logs.Logger on log/slog.
type clientLogger struct{}

// Error logs an error of the client, at debug level when it is only the
// closing connection's (closing).
func (clientLogger) Error(format string, v ...any) { clientLog(slog.LevelError, format, v) }

// Warn logs a warning of the client, at debug level when it is only the
// closing connection's (closing).
func (clientLogger) Warn(format string, v ...any) { clientLog(slog.LevelWarn, format, v) }

// Info logs the client's information at debug level: it reports its own
// progress (a producer waiting for its confirmations at close).
func (clientLogger) Info(format string, v ...any) { clientLog(slog.LevelDebug, format, v) }

// Debug logs the client's debugging line at debug level.
func (clientLogger) Debug(format string, v ...any) { clientLog(slog.LevelDebug, format, v) }

func clientLog(level slog.Level, format string, v []any) {
	if closing(format, v) {
		level = slog.LevelDebug
	}
	// The client's formats use %w in places, which Sprintf does not know.
	msg := fmt.Sprintf(strings.ReplaceAll(format, "%w", "%v"), v...)
	slog.Default().Log(context.Background(), level, "rabbitmq stream client: "+msg)
}

// closing reports whether a client log line is one a clean Close
// provokes: a write on the connection being closed that failed because it
// is closed (by us, or by the server first).
func closing(format string, v []any) bool {
	var err error
	switch {
	case format == closeAnswerFormat && len(v) == 2 && v[1] == closeAnswerDetails:
		err, _ = v[0].(error)
	case format == closeRequestFormat && len(v) == 1:
		err, _ = v[0].(error)
	}
	return err != nil && (errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET))
}
