package streamlog

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/logs"
)

// The client's errors and warnings keep their level, and so do the close
// lines when their error is not the closed connection's; the close lines
// of a closing connection and the client's information go to debug level.
// Not parallel: it replaces the default logger.
func TestClientErrorsStayErrors(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})))
	t.Cleanup(func() { slog.SetDefault(old) })
	logs.LogError("Error during the checkSum, expected %d, checksum %d. Tcp connection will be closed", 1, 2)
	logs.LogError(closeAnswerFormat, errors.New("timeout"), closeAnswerDetails)
	logs.LogWarn(closeRequestFormat, fmt.Errorf("write: %w", syscall.ECONNREFUSED))
	logs.LogError(closeAnswerFormat, fmt.Errorf("write: %w", syscall.EPIPE), closeAnswerDetails) // quiet
	logs.LogInfo("wait inflight messages - unconfirmed len: %d - retry: %d", 1, 0)               // debug
	want := []string{
		`level=ERROR msg="rabbitmq stream client: Error during the checkSum, expected 1, checksum 2. Tcp connection will be closed"`,
		`level=ERROR msg="rabbitmq stream client: Error handling command response: timeout - details: Socket write buffer closeFrameHandler"`,
		`level=WARN msg="rabbitmq stream client: error during Send client close write: connection refused"`,
	}
	if got := strings.TrimSpace(buf.String()); got != strings.Join(want, "\n") {
		t.Fatalf("logged\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}
