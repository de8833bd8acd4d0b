package outbox

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
)

// Config configures a Writer. The zero value is valid.
type Config struct {
	// Table is the outbox table, "table" or "schema.table". Defaults to
	// "public.outbox".
	Table string
	// RawPayload declares the payload column text or bytea: payloads are then
	// stored as given and not checked for JSON. Defaults to false (jsonb).
	RawPayload bool
	// Propagator injects the message's creation context (W3C traceparent
	// and tracestate with propagation.TraceContext) into each message's
	// headers, unless the message sets traceparent itself. Defaults to
	// otel.GetTextMapPropagator(), a no-op until the application installs
	// one (otel.SetTextMapPropagator(propagation.TraceContext{})).
	Propagator propagation.TextMapPropagator
	// TracerProvider records a "create" span per message written (kind
	// PRODUCER, a child of the caller's span, by OpenTelemetry's messaging
	// conventions), whose context is the one injected: the relay's send
	// span and the inbox's process span link to it. A message that sets
	// traceparent itself gets no span. Defaults to
	// otel.GetTracerProvider(), a no-op until the application installs an
	// SDK: then the headers carry the caller's own context.
	TracerProvider trace.TracerProvider
}

// Writer writes outbox messages inside the caller's transaction, of the
// type TTx of its Driver (pgx.Tx or *sql.Tx). It is safe for concurrent
// use.
type Writer[TTx any] struct {
	tx         dbdriver.Family[TTx]
	propagator propagation.TextMapPropagator
	tracer     trace.Tracer
	table      pgname.Table
	rawPayload bool
	insertSQL  string
}

// DefaultTable is the outbox table used when Config.Table is empty.
const DefaultTable = "public.outbox"

// columns are the outbox columns a Writer fills, in the order of row.
var columns = []string{"id", "aggregate_type", "aggregate_id", "event_type", "business_key", "payload", "headers", "topic"}

// NewWriter returns a Writer on driver for cfg (nil means the defaults):
//
//	w, err := outbox.NewWriter(outbox.Pgx(pool), &outbox.Config{})
func NewWriter[TTx any](driver *Driver[TTx], cfg *Config) (*Writer[TTx], error) {
	if driver == nil {
		return nil, errNilDriver
	}
	if cfg == nil {
		cfg = &Config{}
	}
	table, err := pgname.Parse(cmp.Or(cfg.Table, DefaultTable), "public")
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	prop := cfg.Propagator
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &Writer[TTx]{
		tx:         driver.h.Family,
		propagator: prop,
		tracer:     tp.Tracer(tracerName),
		table:      table,
		rawPayload: cfg.RawPayload,
		insertSQL: `INSERT INTO ` + table.Sanitize() + ` (` + strings.Join(columns, ", ") + `)
			  VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
	}, nil
}

// InsertTx writes msg in tx, the caller's transaction, and returns its
// message ID (generated when msg.ID is zero). The row becomes visible to the
// relay when tx commits.
func (w *Writer[TTx]) InsertTx(ctx context.Context, tx TTx, msg Message) (uuid.UUID, error) {
	t := w.tx.Adopt(tx)
	if t == nil {
		return uuid.Nil, errNilTx
	}
	end := w.create(ctx, &msg)
	row, err := w.row(&msg, -1)
	if err == nil {
		if _, err = t.Exec(ctx, w.insertSQL, row...); err != nil {
			err = fmt.Errorf("outbox: insert into %s: %w", w.table, err)
		}
	}
	end(err)
	if err != nil {
		return uuid.Nil, err
	}
	return msg.ID, nil
}

// InsertManyTx writes msgs in tx, the caller's transaction, and returns
// their message IDs in order: with COPY on pgx, with multi-row INSERTs on
// database/sql. Nothing is written when any message is invalid.
func (w *Writer[TTx]) InsertManyTx(ctx context.Context, tx TTx, msgs []Message) ([]uuid.UUID, error) {
	t := w.tx.Adopt(tx)
	if t == nil {
		return nil, errNilTx
	}
	rows := make([][]any, len(msgs))
	ids := make([]uuid.UUID, len(msgs))
	ends := make([]func(error), 0, len(msgs))
	endAll := func(err error) {
		for _, end := range ends {
			end(err)
		}
	}
	for i := range msgs {
		m := msgs[i]
		ends = append(ends, w.create(ctx, &m))
		row, err := w.row(&m, i)
		if err != nil {
			endAll(err)
			return nil, err
		}
		rows[i], ids[i] = row, m.ID
	}
	if len(rows) == 0 {
		return ids, nil
	}
	n, err := t.CopyFrom(ctx, pgx.Identifier{w.table.Schema, w.table.Name}, columns, rows)
	switch {
	case err != nil:
		err = fmt.Errorf("outbox: copy into %s: %w", w.table, err)
	case n != int64(len(rows)):
		err = fmt.Errorf("outbox: copy into %s: wrote %d of %d rows", w.table, n, len(rows))
	}
	endAll(err)
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// row validates m, fills in its ID, and returns the column values in
// columns order. The values encode alike on pgx (Exec and COPY) and on
// database/sql drivers: the headers and the topic are text or nil (lib/pq
// would send a []byte as bytea), and the ID a uuid.UUID, which a
// database/sql driver takes as its text (driver.Valuer).
func (w *Writer[TTx]) row(m *Message, index int) ([]any, error) {
	if err := w.prepare(m, index); err != nil {
		return nil, err
	}
	headers, err := m.headersJSON()
	if err != nil {
		return nil, fmt.Errorf("outbox: encode headers: %w", err)
	}
	var payload any = m.Payload
	if !w.rawPayload {
		// Sent as text so pgx encodes it for json and jsonb columns alike.
		payload = string(m.Payload)
	}
	return []any{m.ID, m.AggregateType, m.AggregateID, m.EventType, m.BusinessKey, payload, headers, nullable(m.Topic)}, nil
}

// prepare validates m and fills in its ID; index is the position in a
// batch, or -1.
func (w *Writer[TTx]) prepare(m *Message, index int) error {
	if err := m.validate(w.rawPayload, index); err != nil {
		return err
	}
	if m.ID == uuid.Nil {
		id, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("outbox: generate message ID: %w", err)
		}
		m.ID = id
	}
	return nil
}
