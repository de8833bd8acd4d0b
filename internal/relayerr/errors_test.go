package relayerr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want Verdict
	}{
		{errors.New("connection reset"), Retryable},
		{kerr.NotLeaderForPartition, Retryable},
		{kerr.RequestTimedOut, Retryable},
		{fmt.Errorf("write: %w", kerr.SaslAuthenticationFailed), Fatal},
		{kerr.TransactionalIDAuthorizationFailed, Fatal},
		{kerr.UnknownTopicOrPartition, TopicUnavailable},
		{kerr.TopicAuthorizationFailed, TopicUnavailable},
		{kerr.CorruptMessage, OwnFaultUnlessTransient},
		{kerr.MessageTooLarge, OwnFault},
		{kerr.PolicyViolation, OwnFault},
		{kerr.InvalidRecord, OwnFault},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestIsPermanent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("connection refused"), false},
		{context.Canceled, false},
		{fmt.Errorf("x: %w", relaytype.ErrConfig), true},
		{fmt.Errorf("x: %w", relaytype.ErrSlotMissing), true},
		{&relaytype.GapError{Slot: "s", Reason: relaytype.GapSlotLost}, true},
		{&relaytype.InvalidEventError{Reason: "too-large"}, true},
		{fmt.Errorf("x: %w", relaytype.ErrSlotActive), false}, // a standby waits
		{fmt.Errorf("x: %w", relaytype.ErrFenced), false},     // the next session starts over
		{fmt.Errorf("x: %w", relaytype.ErrTopicUnavailable), false},
		{Permanent(errors.New("anything")), true},
		{Permanent(nil), false},
		{&pgconn.PgError{Code: "28P01"}, true},  // invalid_password
		{&pgconn.PgError{Code: "57P01"}, false}, // admin_shutdown: reconnect
		{fmt.Errorf("write: %w", kerr.ClusterAuthorizationFailed), true},
		{kerr.UnknownTopicOrPartition, false},
	} {
		if got := IsPermanent(tc.err); got != tc.want {
			t.Errorf("IsPermanent(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
