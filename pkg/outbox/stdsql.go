package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// SQLExecer is the part of a database/sql transaction the Writer needs.
// *sql.Tx satisfies it whatever the driver (pgx's stdlib, lib/pq), and so do
// the transactions of libraries built on database/sql: sqlx (*sqlx.Tx),
// GORM (db.Statement.ConnPool, or the *sql.Tx of tx.DB()), ent and bun
// (their Tx embeds or exposes *sql.Tx).
type SQLExecer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// maxRowsPerStatement keeps a multi-row INSERT under Postgres' 65535
// parameters (8 per row).
const maxRowsPerStatement = 8000

// InsertSQLTx is InsertTx for database/sql: it writes msg in tx, a *sql.Tx
// (or anything with ExecContext bound to the caller's transaction), and
// returns its message ID (generated when msg.ID is zero). The row becomes
// visible to the relay when tx commits.
func (w *Writer) InsertSQLTx(ctx context.Context, tx SQLExecer, msg Message) (uuid.UUID, error) {
	w.injectTrace(ctx, &msg)
	row, err := w.sqlRow(&msg, -1)
	if err != nil {
		return uuid.Nil, err
	}
	if _, err := tx.ExecContext(ctx, w.insertSQL, row...); err != nil {
		return uuid.Nil, fmt.Errorf("outbox: insert into %s: %w", w.table, err)
	}
	return msg.ID, nil
}

// InsertManySQLTx is InsertManyTx for database/sql: it writes msgs in tx
// with multi-row INSERTs (database/sql has no COPY) and returns their
// message IDs in order. Nothing is written when any message is invalid.
func (w *Writer) InsertManySQLTx(ctx context.Context, tx SQLExecer, msgs []Message) ([]uuid.UUID, error) {
	ids := make([]uuid.UUID, len(msgs))
	args := make([]any, 0, len(msgs)*len(w.columns))
	for i := range msgs {
		m := msgs[i]
		w.injectTrace(ctx, &m)
		row, err := w.sqlRow(&m, i)
		if err != nil {
			return nil, err
		}
		ids[i] = m.ID
		args = append(args, row...)
	}
	width := len(w.columns)
	for start := 0; start < len(msgs); start += maxRowsPerStatement {
		end := min(start+maxRowsPerStatement, len(msgs))
		var b strings.Builder
		b.WriteString(`INSERT INTO ` + w.table.Sanitize() + ` (` + strings.Join(w.columns, ", ") + `) VALUES `)
		for r := 0; r < end-start; r++ {
			if r > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			for c := 0; c < width; c++ {
				if c > 0 {
					b.WriteString(", ")
				}
				b.WriteString("$" + strconv.Itoa(r*width+c+1))
			}
			b.WriteByte(')')
		}
		if _, err := tx.ExecContext(ctx, b.String(), args[start*width:end*width]...); err != nil {
			return nil, fmt.Errorf("outbox: insert into %s: %w", w.table, err)
		}
	}
	return ids, nil
}

// EmitSQLTx is EmitTx for database/sql: it writes msg into the WAL of tx as
// a transactional logical decoding message.
func (w *Writer) EmitSQLTx(ctx context.Context, tx SQLExecer, msg Message) (uuid.UUID, error) {
	w.injectTrace(ctx, &msg)
	content, err := w.encodeLogical(&msg)
	if err != nil {
		return uuid.Nil, err
	}
	// Hex text, not []byte: lib/pq and pgx's stdlib encode byte slices
	// differently, text they pass alike.
	if _, err := tx.ExecContext(ctx, `SELECT pg_logical_emit_message(true, $1, decode($2, 'hex'))`,
		LogicalMessagePrefix, fmt.Sprintf("%x", content)); err != nil {
		return uuid.Nil, fmt.Errorf("outbox: emit logical message: %w", err)
	}
	return msg.ID, nil
}

// sqlRow is row with values every database/sql driver passes the same way:
// the ID and the JSON headers as text (lib/pq would send a []byte as bytea).
func (w *Writer) sqlRow(m *Message, index int) ([]any, error) {
	row, err := w.row(m, index)
	if err != nil {
		return nil, err
	}
	row[0] = m.ID.String()
	if h, ok := row[6].([]byte); ok && h != nil {
		row[6] = string(h)
	} else {
		row[6] = nil
	}
	if t, ok := row[7].(*string); ok && t == nil {
		row[7] = nil
	} else if ok {
		row[7] = *t
	}
	return row, nil
}
