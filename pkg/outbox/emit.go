package outbox

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/google/uuid"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
)

// LogicalMessagePrefix is the prefix, "pgoutbox", of the logical decoding
// messages that EmitTx writes and the relay publishes. Messages with other
// prefixes are ignored by the relay.
const LogicalMessagePrefix = contract.LogicalMessagePrefix

// EmitTx writes msg into the WAL of tx, the caller's transaction, as a
// transactional logical decoding message (pg_logical_emit_message with
// prefix "pgoutbox") instead of a table row, and returns its message ID
// (generated when msg.ID is zero). The relay publishes it exactly like a
// row, in commit order, when tx commits; a rolled-back tx publishes
// nothing. No table is written, so nothing needs pruning, but the message
// exists only in the WAL: it reaches Kafka only through a slot that was
// created before tx committed.
//
// msg is validated like InsertTx validates it (JSON payload unless
// Config.RawPayload).
func (w *Writer[TTx]) EmitTx(ctx context.Context, tx TTx, msg Message) (uuid.UUID, error) {
	t := w.tx.Adopt(tx)
	if t == nil {
		return uuid.Nil, errNilTx
	}
	end := w.create(ctx, &msg)
	err := w.emit(ctx, t, &msg)
	end(err)
	if err != nil {
		return uuid.Nil, err
	}
	return msg.ID, nil
}

// emit validates msg, fills in its ID and writes it as a logical message
// in t.
func (w *Writer[TTx]) emit(ctx context.Context, t dbdriver.Tx, msg *Message) error {
	if err := w.prepare(msg, -1); err != nil {
		return err
	}
	ev := msg.event()
	content, err := contract.EncodeLogicalMessage(&ev)
	if err != nil {
		return fmt.Errorf("outbox: encode logical message: %w", err)
	}
	// Hex text, not bytes: every driver passes text alike (lib/pq and pgx
	// encode byte slices differently).
	if _, err := t.Exec(ctx, `SELECT pg_logical_emit_message(true, $1, decode($2, 'hex'))`,
		LogicalMessagePrefix, hex.EncodeToString(content)); err != nil {
		return fmt.Errorf("outbox: emit logical message: %w", err)
	}
	return nil
}
