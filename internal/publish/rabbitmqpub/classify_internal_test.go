package rabbitmqpub

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/pgoutbox/pgoutbox/internal/publish"
)

// A client error's outcome prints as one line under every verb (the
// client's errors carry a call stack that %+v, slog's text handler's
// verb, prints) and still matches the client's error.
func TestClassifyPrintsOneLine(t *testing.T) {
	for _, err := range []error{stream.ConfirmationTimoutError, stream.FrameTooLarge, stream.StreamDoesNotExist} {
		o := classify(err)
		if s := fmt.Sprintf("%+v", o.Err); strings.Contains(s, "\n") || s != err.Error() {
			t.Errorf("%v prints as %q", err, s)
		}
		if !errors.Is(o.Err, err) {
			t.Errorf("%v: the outcome's error does not match it", err)
		}
	}
	if o := classify(stream.FrameTooLarge); o.Verdict != publish.Refused || o.Reason != publish.ReasonTooLarge {
		t.Errorf("frame too large: %+v", o)
	}
}
