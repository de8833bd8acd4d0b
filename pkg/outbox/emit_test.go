package outbox_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// EmitTx writes a transactional logical message that decodes back to the
// message, byte-exact; a rolled-back transaction emits nothing.
func TestEmitTx(t *testing.T) {
	forDrivers(t, &outbox.Config{RawPayload: true}, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		slot := emitSlot(t, b, "s_emit")
		msg := outbox.Message{
			AggregateType: "payment", AggregateID: "pay-1", EventType: "payment.completed", BusinessKey: "req-1",
			Payload: []byte{0x00, 0xff, 'G', 0xc3, 0xbc, '\n'}, Headers: map[string]string{"traceparent": "00-abc-01"}, Topic: "payments.v1",
		}
		var id uuid.UUID
		if err := b.inTx(ctx, func(w txWriter) (err error) {
			id, err = w.Emit(msg)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := b.rolledBack(ctx, func(w txWriter) error {
			_, err := w.Emit(msg)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		msgs := emitted(t, b, slot)
		if len(msgs) != 1 {
			t.Fatalf("%d messages decoded, want 1 (the rolled-back one must not appear)", len(msgs))
		}
		msg.ID = id
		if got := msgs[0]; !reflect.DeepEqual(got, msg) {
			t.Fatalf("decoded %+v, want %+v", got, msg)
		}
	})
}

// emitSlot creates a slot (pgoutput) named for prefix and b's driver on a
// publication of b's outbox, to read what EmitTx emits from now on (see
// emitted), and returns its name. Slots are the server's, not the
// database's: the tests of the two drivers need two.
func emitSlot(t *testing.T, b *bundle, prefix string) (slot string) {
	t.Helper()
	slot = prefix + "_" + strings.ReplaceAll(b.d.name, "/", "_")
	for _, q := range []string{`CREATE PUBLICATION p_` + slot + ` FOR TABLE public.outbox WITH (publish = 'insert')`,
		`SELECT pg_create_logical_replication_slot('` + slot + `', 'pgoutput')`} {
		if _, err := b.db.Pool.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	return slot
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
		m, err := contract.DecodeLogicalMessage(rest[4 : 4+n])
		return outbox.Message{ID: m.ID, AggregateType: m.AggregateType, AggregateID: m.AggregateID, EventType: m.EventType,
			BusinessKey: m.BusinessKey, Payload: m.Payload, Headers: m.Headers, Topic: m.Topic}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}
