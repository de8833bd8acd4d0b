package admin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/internal/sink"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Backfill is relay.Backfill: the rows opts selects, read in one
// read-only snapshot and built into records as the WAL reader builds them,
// written through the relay's sink.
func Backfill(ctx context.Context, c *Config, opts relaytype.BackfillOptions) (int, error) {
	if c.KafkaErr != nil {
		return 0, c.KafkaErr
	}
	if opts.Since.IsZero() {
		return 0, fmt.Errorf("%w: backfill needs a since time", relaytype.ErrConfig)
	}
	conn, err := pgconnect.Connect(ctx, c.DatabaseURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	m := relaymetrics.NewMetrics(c.Slot, &pgconnect.Live{})
	sk := NewSink(c, m)
	defer sk.Close()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return 0, fmt.Errorf("relay: backfill: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	return backfillTx(ctx, tx, c, m, sk, opts, nil)
}

// Recover is relay.Recover: RecoverGap with a sink and metrics of its own.
func Recover(ctx context.Context, c *Config) (*relaytype.RecoverResult, error) {
	if c.KafkaErr != nil {
		return nil, c.KafkaErr
	}
	m := relaymetrics.NewMetrics(c.Slot, &pgconnect.Live{})
	sk := NewSink(c, m)
	defer sk.Close()
	return RecoverGap(ctx, c, m, sk)
}

// recoverLockKey namespaces the advisory lock that serialises recoveries
// of one slot.
const recoverLockKey = "pgoutbox.recover."

// RecoverGap repairs the gap of c.Slot, if there is one: it drops the slot,
// creates it anew exporting its snapshot, publishes the outbox rows since
// the last confirmed commit time minus the margin from that snapshot, and
// records the new slot's state.
func RecoverGap(ctx context.Context, c *Config, m *relaymetrics.Metrics, sk *sink.Sink) (*relaytype.RecoverResult, error) {
	conn, err := pgconnect.Connect(ctx, c.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Two recoveries of one slot would drop each other's slot.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext($1))`, recoverLockKey+c.Slot); err != nil {
		return nil, fmt.Errorf("relay: recover: lock: %w", err)
	}
	info, active, err := readGapSlot(ctx, conn, c.Slot)
	if err != nil {
		return nil, err
	}
	// The state after the slot, as in slotstate.EnsureSlot: no false gap from a
	// relay still confirming meanwhile.
	st, err := slotstate.ReadState(ctx, conn, &c.Config)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("%w: no relay state for slot %s: nothing to recover (relay setup creates the slot)", relaytype.ErrSlotMissing, c.Slot)
	}
	gap, err := slotstate.CheckGap(ctx, &c.Config, st, info)
	if err != nil || gap == nil {
		return &relaytype.RecoverResult{}, err
	}
	res := &relaytype.RecoverResult{Gap: gap, Since: st.Since().Add(-c.BackfillMargin)}
	if st.PrunedBefore != nil && st.PrunedBefore.After(res.Since) {
		return nil, &relaytype.BackfillPrunedError{Slot: c.Slot, From: res.Since, To: *st.PrunedBefore}
	}
	if info.Exists {
		if active != nil {
			return nil, fmt.Errorf("%w: slot %s is streamed by backend %d; stop it first", relaytype.ErrSlotActive, c.Slot, *active)
		}
		if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, c.Slot); err != nil {
			return nil, fmt.Errorf("relay: drop slot %s: %w", c.Slot, err)
		}
	}
	c.Logger.Warn("recovering a gap: creating the slot anew and publishing the outbox rows from the table",
		"slot", c.Slot, "gap", gap.Reason, "since", res.Since, "margin", c.BackfillMargin)
	ns, err := backfillNewSlot(ctx, conn, c, m, sk, res)
	if err != nil {
		return nil, err
	}
	// Everything committed before the snapshot is in Kafka now: that is
	// the new confirmed commit time.
	if err := slotstate.WriteNewState(ctx, conn, &c.Config, ns, &ns.At); err != nil {
		return nil, err
	}
	m.Gap.Reset()
	c.Logger.Info("recovered the gap; the relay streams from the new slot", "slot", c.Slot, "published", res.Published,
		"since", res.Since, "slot_lsn", ns.Consistent.String())
	return res, nil
}

// readGapSlot reads what recovery needs of the slot: whether it exists,
// its confirmed position and wal_status (for slotstate.CheckGap), and the PID of the
// process streaming it (nil when none).
func readGapSlot(ctx context.Context, conn *pgx.Conn, slot string) (info slotstate.SlotInfo, active *int32, err error) {
	var confirmed, walStatus *string
	err = conn.QueryRow(ctx, `SELECT active_pid, confirmed_flush_lsn::text, wal_status, coalesce(to_jsonb(s) ->> 'invalidation_reason', '')
		FROM pg_replication_slots s WHERE slot_name = $1`, slot).
		Scan(&active, &confirmed, &walStatus, &info.Invalidation)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return slotstate.SlotInfo{}, nil, nil
	case err != nil:
		return slotstate.SlotInfo{}, nil, fmt.Errorf("relay: read slot %s: %w", slot, err)
	}
	info.Exists, info.WALStatus = true, slotstate.Deref(walStatus)
	if confirmed != nil && info.Invalidation == "" {
		if info.Confirmed, err = pglogrepl.ParseLSN(*confirmed); err != nil {
			return slotstate.SlotInfo{}, nil, err
		}
	}
	return info, active, nil
}

// backfillNewSlot creates c.Slot exporting its snapshot and publishes, in
// that snapshot, the rows created since res.Since; it sets res.SlotLSN and
// res.Published and returns the new slot.
func backfillNewSlot(ctx context.Context, conn *pgx.Conn, c *Config, m *relaymetrics.Metrics, sk *sink.Sink, res *relaytype.RecoverResult) (slotstate.NewSlot, error) {
	rc, err := pgconnect.ConnectReplication(ctx, c.DatabaseURL)
	if err != nil {
		return slotstate.NewSlot{}, err
	}
	defer rc.Close(context.WithoutCancel(ctx))
	ns, err := slotstate.CreateSlotOn(ctx, rc, &c.Config, true)
	if err != nil {
		return slotstate.NewSlot{}, err
	}
	res.SlotLSN = ns.Consistent
	// The snapshot lives until rc runs its next command: import it first.
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return slotstate.NewSlot{}, fmt.Errorf("relay: recover: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SET TRANSACTION SNAPSHOT '`+strings.ReplaceAll(ns.Snapshot, `'`, `''`)+`'`); err != nil {
		return slotstate.NewSlot{}, fmt.Errorf("relay: recover: import the slot's snapshot: %w", err)
	}
	rc.Close(context.WithoutCancel(ctx))
	opts := relaytype.BackfillOptions{Since: res.Since, Progress: func(n int, at time.Time) {
		c.Logger.Info("recovering: published outbox rows", "slot", c.Slot, "rows", n, "created_at", at)
	}}
	held, err := heldInKafka(ctx, tx, c, sk, opts)
	if err != nil {
		return slotstate.NewSlot{}, err
	}
	if res.Published, err = backfillTx(ctx, tx, c, m, sk, opts, held); err != nil {
		return slotstate.NewSlot{}, err
	}
	//lint:ignore SA1019 the deprecated field stays filled for its users
	res.AlreadyHeld, res.InKafka = held.skipped, held.skipped
	if err := tx.Rollback(ctx); err != nil {
		return slotstate.NewSlot{}, fmt.Errorf("relay: recover: %w", err)
	}
	return ns, nil
}

// backfillTx publishes the rows opts selects, read in tx, through sk,
// except those held holds (nil: none).
func backfillTx(ctx context.Context, tx pgx.Tx, c *Config, m *relaymetrics.Metrics, sk *sink.Sink, opts relaytype.BackfillOptions, held *heldIDs) (int, error) {
	out := backfillBatches{sk: sk, size: c.Sink.BatchSize, progress: opts.Progress}
	dl := c.deadLetters(m)
	err := eachRow(ctx, tx, c, opts, func(ev decode.Event, createdAt time.Time) error {
		if held.has(&ev) {
			return nil
		}
		if ev.Invalid != nil {
			if c.Sink.StopOnInvalid {
				m.Invalid.WithLabelValues(ev.Invalid.Reason).Inc()
				return relayerr.Permanent(ev.Invalid)
			}
			dl.Shape(&ev)
		}
		return out.add(ctx, ev, createdAt)
	})
	if err != nil {
		return out.published, err
	}
	return out.published, out.flush(ctx)
}

// eachRow calls fn with the event of each row opts selects, read in tx, in
// the order of backfillQuery, as the relay builds it from the WAL (an
// invalid row's event carries Invalid and is not yet a dead letter).
func eachRow(ctx context.Context, tx pgx.Tx, c *Config, opts relaytype.BackfillOptions, fn func(ev decode.Event, createdAt time.Time) error) error {
	table, _ := pgname.Parse(c.Table, "public")
	names, l, err := backfillColumns(ctx, tx, table, c.TableFormat)
	if err != nil {
		return err
	}
	var commitTS string
	if err := tx.QueryRow(ctx, `SELECT current_setting('track_commit_timestamp')`).Scan(&commitTS); err != nil {
		return fmt.Errorf("relay: backfill: read track_commit_timestamp: %w", err)
	}
	q, args := backfillQuery(table, &l, names, opts, commitTS == "on")
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("relay: backfill: read %s: %w", table, err)
	}
	defer rows.Close()
	dec := decode.NewDecoder(c.Decode, nil) // rows come from the table: no relation messages to resolve
	row := newTextRow(len(names))
	for rows.Next() {
		if err := rows.Scan(row.dest...); err != nil {
			return fmt.Errorf("relay: backfill: read %s: %w", table, err)
		}
		// The commit time is unknown here; created_at stands for it.
		dec.CommitTime = row.createdAt
		if err := fn(dec.RowEvent(&l, row.tuple()), row.createdAt); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("relay: backfill: read %s: %w", table, err)
	}
	return nil
}

// backfillColumns reads the table's column names, in the table's order,
// and the decoder's layout for them. A table without the format's creation
// time column (Debezium's optional timestamp) cannot be backfilled.
func backfillColumns(ctx context.Context, tx pgx.Tx, table pgname.Table, f relaytype.TableFormat) ([]string, decode.Layout, error) {
	names, types, err := slotstate.ReadColumns(ctx, tx, table)
	if err != nil {
		return nil, decode.Layout{}, fmt.Errorf("relay: backfill: read columns of %s: %w", table, err)
	}
	l, err := decode.CheckColumns(table.String(), f, names, types)
	if err != nil {
		return nil, decode.Layout{}, err
	}
	if err := slotstate.CheckCreatedAt(table, &l, names); err != nil {
		return nil, decode.Layout{}, err
	}
	return names, l, nil
}

// backfillQuery selects the creation time and then every column as text,
// in the table's order, so that the decoder's layout applies as it does to
// a pgoutput tuple.
//
// The rows come in the order the WAL has them as nearly as the table can
// tell, so that each aggregate's records keep their order: by commit time
// when commitTS (track_commit_timestamp is on: every row's transaction,
// savepoints included, has its commit's time), then by creation time
// (the default, now(), is the transaction's start: one value for all its
// rows), then by the command that inserted the row within its
// transaction (cmin: statement order, across savepoints too). The rows
// of one statement (a COPY, a multi-row INSERT) share all of these: a
// version 7 ID orders them as outbox.Writer made them (its generator is
// monotonic within a process); other IDs (random version 4) order
// nothing, and their rows come in their place in the table (ctid), which
// is their order unless the statement filled a page and went on in free
// space of an earlier one (after rollbacks, pruning and vacuum; the fault
// suite saw it, so ctid does not come before a version 7 ID). Without
// commitTS, transactions of one aggregate that committed in another
// order than they started come in their start order.
func backfillQuery(table pgname.Table, l *decode.Layout, names []string, opts relaytype.BackfillOptions, commitTS bool) (string, []any) {
	cols := make([]string, len(names))
	for i, n := range names {
		cols[i] = "o." + pgx.Identifier{n}.Sanitize() + "::text"
	}
	createdAt := "o." + pgx.Identifier{l.Shape.CreatedAt}.Sanitize()
	q := `SELECT ` + createdAt + `, ` + strings.Join(cols, ", ") + ` FROM ` + table.Sanitize() + ` AS o WHERE ` + createdAt + ` >= $1`
	args := []any{opts.Since}
	if !opts.Until.IsZero() {
		args = append(args, opts.Until)
		q += fmt.Sprintf(` AND %s < $%d`, createdAt, len(args))
	}
	if opts.AggregateType != "" {
		args = append(args, opts.AggregateType)
		q += fmt.Sprintf(` AND o.%s = $%d`, pgx.Identifier{l.Shape.Columns[tableformat.ColAggregateType].Name}.Sanitize(), len(args))
	}
	id := "o." + pgx.Identifier{l.Shape.Columns[tableformat.ColID].Name}.Sanitize()
	v7 := `CASE WHEN substr(` + id + `::text, 15, 1) = '7' THEN ` + id + `::text END`
	order := createdAt + `, o.cmin::text::bigint, ` + v7 + `, o.ctid`
	if commitTS {
		order = `pg_xact_commit_timestamp(o.xmin) NULLS FIRST, ` + order
	}
	return q + ` ORDER BY ` + order, args
}

// textRow is the scan target of one backfillQuery row.
type textRow struct {
	createdAt time.Time
	vals      []*string
	dest      []any
}

func newTextRow(n int) *textRow {
	r := &textRow{vals: make([]*string, n), dest: make([]any, n+1)}
	r.dest[0] = &r.createdAt
	for i := range r.vals {
		r.dest[i+1] = &r.vals[i]
	}
	return r
}

// tuple is the row as pgoutput would send it: text columns, NULL as null.
func (r *textRow) tuple() []decode.TupleColumn {
	tuple := make([]decode.TupleColumn, len(r.vals))
	for i, v := range r.vals {
		if v == nil {
			tuple[i] = decode.TupleColumn{Kind: pglogrepl.TupleDataTypeNull}
			continue
		}
		tuple[i] = decode.TupleColumn{Kind: pglogrepl.TupleDataTypeText, Data: []byte(*v)}
	}
	return tuple
}

// backfillBatches publishes events in batches of size, reporting progress
// after each with the created_at of the last row read.
type backfillBatches struct {
	sk        *sink.Sink
	size      int
	progress  func(published int, createdAt time.Time)
	batch     []decode.Event
	published int
	last      time.Time
}

func (b *backfillBatches) add(ctx context.Context, ev decode.Event, createdAt time.Time) error {
	b.batch = append(b.batch, ev)
	b.last = createdAt
	if len(b.batch) >= b.size {
		return b.flush(ctx)
	}
	return nil
}

func (b *backfillBatches) flush(ctx context.Context) error {
	if len(b.batch) == 0 {
		return nil
	}
	if err := b.sk.Publish(ctx, b.batch); err != nil {
		return err
	}
	b.published += len(b.batch)
	b.batch = b.batch[:0]
	if b.progress != nil {
		b.progress(b.published, b.last)
	}
	return nil
}
