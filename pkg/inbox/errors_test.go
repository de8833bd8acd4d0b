package inbox_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

func TestClassifiers(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: code}) }
	for _, tc := range []struct {
		err       error
		retryable bool
		permanent bool
	}{
		{pg("40001"), true, false},
		{pg("40P01"), true, false},
		{pg("23505"), false, false},
		{errors.New("plain"), false, false},
		{inbox.Permanent(errors.New("bad")), false, true},
		{fmt.Errorf("ctx: %w", inbox.Permanent(pg("40001"))), true, true},
	} {
		if got := inbox.Retryable(tc.err); got != tc.retryable {
			t.Errorf("Retryable(%v) = %v", tc.err, got)
		}
		if got := inbox.IsPermanent(tc.err); got != tc.permanent {
			t.Errorf("IsPermanent(%v) = %v", tc.err, got)
		}
	}
	if inbox.Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	want := map[inbox.Outcome]string{inbox.Processed: "processed", inbox.Duplicate: "duplicate", inbox.Conflict: "conflict",
		inbox.Busy: "busy", inbox.Retry: "retry", inbox.DeadLettered: "dead-lettered", inbox.Outcome(0): "Outcome(0)"}
	for o, s := range want {
		if o.String() != s {
			t.Errorf("%d.String() = %q, want %q", int(o), o.String(), s)
		}
	}
	for _, s := range []string{"completed", "FAILED_FINAL", "Failed_Retryable"} {
		if _, err := inbox.ParseStatus(s); err != nil {
			t.Error(err)
		}
	}
	if _, err := inbox.ParseStatus("DONE"); err == nil {
		t.Error("ParseStatus accepted DONE")
	}
	if inbox.ConflictPolicyStop != "stop" || inbox.ConflictPolicyDeadLetter != "dead-letter" {
		t.Errorf("conflict policies %q, %q; want the flag words stop, dead-letter", inbox.ConflictPolicyStop, inbox.ConflictPolicyDeadLetter)
	}
	for _, p := range []inbox.ConflictPolicy{"", inbox.ConflictPolicyDeadLetter, inbox.ConflictPolicyStop} {
		if _, err := inbox.New(inbox.Pgx(beginnerStub{}), &inbox.Config{Consumer: "c", ConflictPolicy: p}); err != nil {
			t.Errorf("ConflictPolicy %q: %v", p, err)
		}
	}
	for _, p := range []inbox.ConflictPolicy{"error", "dlq", "Stop"} {
		if _, err := inbox.New(inbox.Pgx(beginnerStub{}), &inbox.Config{Consumer: "c", ConflictPolicy: p}); err == nil {
			t.Errorf("New accepted ConflictPolicy %q", p)
		}
	}
	// Statuses hands out a copy: changing it changes nothing else.
	all := inbox.Statuses()
	all[0] = "CHANGED"
	if got := inbox.Statuses()[0]; got != inbox.StatusReceived {
		t.Errorf("Statuses()[0] = %q after a caller changed its copy", got)
	}
	if _, err := inbox.New(inbox.Pgx(beginnerStub{}), &inbox.Config{}); err == nil {
		t.Error("New accepted a config without Consumer")
	}
}
