package relaytype_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Each error type unwraps to its sentinels (what errors.Is callers and
// the CLI's exit codes rely on) and its message names what an operator
// needs: the slot or message, the reason and the way out.
func TestErrorTypes(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		err   error
		is    []error
		isNot []error
		has   []string
	}{
		{"invalid event", &relaytype.InvalidEventError{MessageID: uuid.MustParse("018f4d2e-8b1c-7a3e-9f00-0123456789ab"), Reason: "null-column", Detail: "topic is NULL"},
			[]error{relaytype.ErrInvalidEvent}, []error{relaytype.ErrGap},
			[]string{"018f4d2e-8b1c-7a3e-9f00-0123456789ab", "(null-column)", "topic is NULL"}},
		{"gap", &relaytype.GapError{Slot: "s1", Reason: relaytype.GapSlotRecreated, Detail: "moved", Since: since, ConfirmedLSN: 0x16B3748},
			[]error{relaytype.ErrGap}, []error{relaytype.ErrSlotInvalidated},
			[]string{"gap on slot s1 (slot-recreated): moved", "after 2026-12-01T10:00:00Z (LSN 0/16B3748)", "relay recover"}},
		{"lost slot", &relaytype.GapError{Slot: "s1", Reason: relaytype.GapSlotLost, MessagesSeen: true},
			[]error{relaytype.ErrGap, relaytype.ErrSlotInvalidated}, nil,
			[]string{"(slot-lost)", "logical messages (EmitTx)"}},
		{"backfill pruned", &relaytype.BackfillPrunedError{Slot: "s1", From: since, To: since.Add(time.Hour)},
			[]error{relaytype.ErrBackfillPruned}, []error{relaytype.ErrGap},
			[]string{"slot s1", "2026-12-01T10:00:00Z to 2026-12-01T11:00:00Z", "relay backfill --since 2026-12-01T11:00:00Z"}},
		{"prerequisites", &relaytype.PrerequisitesError{Problems: []relaytype.Problem{
			{Check: "wal_level", Detail: "wal_level is replica", Fix: "ALTER SYSTEM SET wal_level = logical"},
			{Check: "replication role", Detail: "role app lacks REPLICATION", Fix: "ALTER ROLE app REPLICATION"}}},
			[]error{relaytype.ErrPrerequisites}, nil,
			[]string{"(1) wal_level is replica — fix: ALTER SYSTEM SET wal_level = logical", "(2) role app lacks REPLICATION"}},
	} {
		for _, target := range tc.is {
			if !errors.Is(tc.err, target) {
				t.Errorf("%s: errors.Is(%v) is false", tc.name, target)
			}
		}
		for _, target := range tc.isNot {
			if errors.Is(tc.err, target) {
				t.Errorf("%s: errors.Is(%v) is true", tc.name, target)
			}
		}
		for _, s := range tc.has {
			if !strings.Contains(tc.err.Error(), s) {
				t.Errorf("%s: %q lacks %q", tc.name, tc.err, s)
			}
		}
	}
}

// A verify report is OK only without missing, mismatched and out-of-order
// records.
func TestVerifyReportOK(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		r    relaytype.VerifyReport
		want bool
	}{
		{relaytype.VerifyReport{}, true},
		{relaytype.VerifyReport{Missing: 1}, false},
		{relaytype.VerifyReport{Mismatched: 1}, false},
		{relaytype.VerifyReport{OrderBreaks: 1}, false},
	} {
		if got := tc.r.OK(); got != tc.want {
			t.Errorf("%+v: OK() = %v, want %v", tc.r, got, tc.want)
		}
	}
}
