package outbox_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// EmitTx writes a transactional logical message that decodes back to the
// message, byte-exact; a rolled-back transaction emits nothing.
func TestEmitTx(t *testing.T) {
	t.Parallel()
	b := setup(t, &outbox.Config{RawPayload: true})
	ctx := context.Background()
	emitSlot(t, b, "s_emit")
	msg := outbox.Message{
		AggregateType: "payment", AggregateID: "pay-1", EventType: "payment.completed", BusinessKey: "req-1",
		Payload: []byte{0x00, 0xff, 'G', 0xc3, 0xbc, '\n'}, Headers: map[string]string{"traceparent": "00-abc-01"}, Topic: "payments.v1",
	}
	id, err := inTx(t, b.db, func(tx pgx.Tx) (uuid.UUID, error) { return b.writer.EmitTx(ctx, tx, msg) })
	if err != nil {
		t.Fatal(err)
	}
	tx, err := b.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.writer.EmitTx(ctx, tx, msg); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	msgs := emitted(t, b, "s_emit")
	if len(msgs) != 1 {
		t.Fatalf("%d messages decoded, want 1 (the rolled-back one must not appear)", len(msgs))
	}
	got := msgs[0]
	msg.ID = id
	if got.ID != id || got.AggregateType != msg.AggregateType || got.AggregateID != msg.AggregateID || got.EventType != msg.EventType ||
		got.BusinessKey != msg.BusinessKey || !bytes.Equal(got.Payload, msg.Payload) || got.Topic != msg.Topic ||
		len(got.Headers) != 1 || got.Headers["traceparent"] != "00-abc-01" {
		t.Fatalf("decoded %+v, want %+v", got, msg)
	}
}

// emitSlot creates slot (pgoutput) on a publication of b's outbox, to read
// what EmitTx and EmitSQLTx emit from now on (see emitted).
func emitSlot(t *testing.T, b *bundle, slot string) {
	t.Helper()
	for _, q := range []string{`CREATE PUBLICATION p_` + slot + ` FOR TABLE public.outbox WITH (publish = 'insert')`,
		`SELECT pg_create_logical_replication_slot('` + slot + `', 'pgoutput')`} {
		if _, err := b.db.Pool.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
}

// emitted consumes the transactional pgoutbox logical messages slot has
// decoded (see emitSlot) and returns them decoded, in commit order.
func emitted(t *testing.T, b *bundle, slot string) []outbox.Message {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT data FROM pg_logical_slot_get_binary_changes($1::name, NULL, NULL,
		'proto_version', '1', 'publication_names', 'p_' || $1::text, 'messages', 'true') WHERE substr(data, 1, 1) = 'M'::bytea`, slot)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (outbox.Message, error) {
		var data []byte
		if err := r.Scan(&data); err != nil {
			return outbox.Message{}, err
		}
		// 'M', flags, LSN, prefix\0, length, content.
		if data[1] != 1 {
			t.Errorf("message not transactional (flags %d)", data[1])
		}
		rest := data[10:]
		prefix, rest, _ := bytes.Cut(rest, []byte{0})
		if string(prefix) != outbox.LogicalMessagePrefix {
			t.Errorf("prefix %q", prefix)
		}
		n := binary.BigEndian.Uint32(rest)
		return outbox.DecodeLogicalMessage(rest[4 : 4+n])
	})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func TestEmitTxValidates(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, err := inTx(t, b.db, func(tx pgx.Tx) (uuid.UUID, error) {
		return b.writer.EmitTx(context.Background(), tx, outbox.Message{AggregateType: "a", AggregateID: "1", EventType: "e", BusinessKey: "k", Payload: []byte(`{`)})
	})
	if !errors.Is(err, outbox.ErrInvalidMessage) {
		t.Fatalf("EmitTx with bad JSON: %v", err)
	}
}

func TestDecodeLogicalMessageRejects(t *testing.T) {
	t.Parallel()
	for _, content := range []string{
		``, `[]`, `{"v":2,"id":"0190f0e0-0000-7000-8000-000000000001"}`,
		`{"v":1,"aggregate_type":"a","aggregate_id":"1","event_type":"e","business_key":"k","payload":"e30="}`,
		`{"v":1,"id":"0190f0e0-0000-7000-8000-000000000001","aggregate_id":"1","event_type":"e","business_key":"k","payload":"e30="}`,
		`{"v":1,"id":"0190f0e0-0000-7000-8000-000000000001","aggregate_type":"a","aggregate_id":"1","event_type":"e","business_key":"k","payload":"%%"}`,
	} {
		if _, err := outbox.DecodeLogicalMessage([]byte(content)); !errors.Is(err, outbox.ErrBadLogicalMessage) {
			t.Errorf("DecodeLogicalMessage(%q): %v, want ErrBadLogicalMessage", content, err)
		}
	}
}
