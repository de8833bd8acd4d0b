package inbox

import "fmt"

// Status is the state of an inbox row.
type Status string

// The inbox state machine: RECEIVED -> PROCESSING -> COMPLETED, or
// FAILED_RETRYABLE -> ... -> FAILED_FINAL. RECEIVED: an attempt the consumer
// loop counted before starting it (see the package documentation, Crash
// loops); PROCESSING: a committed claim with a lease (two-phase path).
const (
	StatusReceived        Status = "RECEIVED"
	StatusProcessing      Status = "PROCESSING"
	StatusCompleted       Status = "COMPLETED"
	StatusFailedRetryable Status = "FAILED_RETRYABLE"
	StatusFailedFinal     Status = "FAILED_FINAL"
)

// statuses is every status in state-machine order.
var statuses = [...]Status{StatusReceived, StatusProcessing, StatusCompleted, StatusFailedRetryable, StatusFailedFinal}

// Statuses returns every status in state-machine order, in a new slice the
// caller may change.
func Statuses() []Status {
	s := statuses
	return s[:]
}

// ParseStatus accepts a status in any case.
func ParseStatus(s string) (Status, error) {
	for _, st := range statuses {
		if equalFold(string(st), s) {
			return st, nil
		}
	}
	return "", fmt.Errorf("inbox: unknown status %q", s)
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if 'a' <= y && y <= 'z' {
			y -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
