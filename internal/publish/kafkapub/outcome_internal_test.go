package kafkapub

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/publish"
)

// Kafka's answers map to the loop's verdicts by relayerr.Classify, with
// the reason the loop names in a dead letter or the topic_unavailable
// gauge; an epoch error fences only a transactional session (an
// at-least-once one has no epoch to lose: it is what Classify says).
func TestOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err    error
		txn    bool
		want   publish.Verdict
		reason string
	}{
		{nil, false, publish.Confirmed, ""},
		{errors.New("i/o timeout"), false, publish.Retry, ""},
		{kerr.NotEnoughReplicas, false, publish.Retry, ""},
		{kerr.CorruptMessage, false, publish.RefusedUnlessTransient, ""},
		{kerr.MessageTooLarge, false, publish.Refused, publish.ReasonTooLarge},
		{fmt.Errorf("produce: %w", kerr.RecordListTooLarge), false, publish.Refused, publish.ReasonTooLarge},
		{kerr.PolicyViolation, false, publish.Refused, ""},
		{kerr.UnknownTopicOrPartition, false, publish.TopicUnavailable, publish.ReasonUnknownTopic},
		{kerr.TopicAuthorizationFailed, false, publish.TopicUnavailable, publish.ReasonNotAuthorized},
		{kerr.SaslAuthenticationFailed, false, publish.Fatal, ""},
		{kerr.ProducerFenced, false, publish.Fatal, ""},
		{kerr.ProducerFenced, true, publish.Fenced, ""},
		{kerr.InvalidProducerEpoch, false, publish.Retry, ""},
		{kerr.InvalidProducerEpoch, true, publish.Fenced, ""},
		{producer.ErrFenced, true, publish.Fenced, ""},
	} {
		p := &Publisher{txn: tc.txn}
		o := p.outcome(tc.err)
		if o.Verdict != tc.want || o.Reason != tc.reason || o.Err != tc.err {
			t.Errorf("%v (transactional %v): %+v, want verdict %d, reason %q", tc.err, tc.txn, o, tc.want, tc.reason)
		}
	}
	if err := fenced(kerr.ProducerFenced); !errors.Is(err, publish.ErrFenced) || !errors.Is(err, kerr.ProducerFenced) {
		t.Errorf("fenced: %v", err)
	}
}
