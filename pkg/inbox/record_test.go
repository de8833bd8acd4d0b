package inbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
)

// A record with the relay's headers is read by them even when it also
// carries CloudEvents headers (the relay's --cloudevents writes both).
func TestRecordPrefersContractHeadersOverCloudEvents(t *testing.T) {
	t.Parallel()
	r := inbox.KafkaRecord{Value: []byte(`{}`), Headers: []inbox.KafkaHeader{
		{Key: "message-id", Value: []byte("m-1")}, {Key: "business-key", Value: []byte("bk-1")}, {Key: "event-type", Value: []byte("order.created")},
		{Key: "ce_id", Value: []byte("other")}, {Key: "ce_businesskey", Value: []byte("other-bk")}, {Key: "ce_type", Value: []byte("other.type")},
	}}
	m := r.Message()
	if m.ID != "m-1" || m.BusinessKey != "bk-1" || m.Headers["event-type"] != "order.created" {
		t.Errorf("ID %q, business key %q, event type %q; want m-1, bk-1, order.created", m.ID, m.BusinessKey, m.Headers["event-type"])
	}
}

// On a caller's own consumer loop, KafkaRecord.Message marks a record that
// repeats a contract header, and Process refuses it (ErrInvalidMessage,
// RepeatedHeaderError) before the claim; the handler never runs, and
// DeadLetterWriter.Settle dead-letters it with reason repeated-header.
func TestProcessRefusesRepeatedContractHeader(t *testing.T) {
	t.Parallel()
	b, dw, brokers, dlq := ownLoopSetup(t, nil)
	for _, dup := range []inbox.KafkaHeader{
		{Key: "message-id", Value: []byte("m-forged")},
		{Key: "BUSINESS-KEY", Value: []byte("k-forged")},
		{Key: "aggregate-id", Value: []byte("a-2")},
	} {
		r := inbox.KafkaRecord{Topic: "t", Value: []byte(`{}`), Headers: []inbox.KafkaHeader{
			{Key: "message-id", Value: []byte("m-1")}, {Key: "business-key", Value: []byte("k-1")},
			{Key: "aggregate-id", Value: []byte("a-1")}, dup}}
		ran := false
		_, err := b.In.Process(context.Background(), r.Message(), func(context.Context, pgx.Tx, inbox.Message) (string, error) {
			ran = true
			return "", nil
		})
		var rep *inbox.RepeatedHeaderError
		if !errors.Is(err, inbox.ErrInvalidMessage) || !errors.As(err, &rep) || !strings.EqualFold(rep.Header, dup.Key) || ran {
			t.Fatalf("repeated %s: err %v, handler ran %v", dup.Key, err, ran)
		}
		if commit, err := dw.Settle(context.Background(), r, inbox.Result{}, err); !commit || err != nil {
			t.Fatalf("Settle: commit %v, %v", commit, err)
		}
	}
	for _, r := range inboxtest.DeadLetters(t, brokers, dlq, 3) {
		if reason, _ := r.Header("dlq-reason"); reason != inbox.ReasonRepeatedHeader {
			t.Fatalf("dead letter reason %q", reason)
		}
	}
	var rows int
	if err := b.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM inbox`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("inbox holds %d rows (%v)", rows, err)
	}
}
