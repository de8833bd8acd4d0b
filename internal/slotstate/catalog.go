package slotstate

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// catalogCheckInterval is how often a streaming session checks that every
// outbox insert still reaches its slot. Confirmation waits for the next
// check, so it bounds how much longer the relay holds WAL.
const catalogCheckInterval = 250 * time.Millisecond

// catalogIdleInterval is how often a session checks while no commit it
// read waits for the fence and keepalives moved the position it would
// confirm less than idleSlack past it: a fleet's idle sources (three
// statements a check, four checks a second each) cost its busy ones CPU,
// and the server's. Every write to any database of the server (a busy
// source's state row, ten a second) moves every slot's keepalive position,
// so a check per keepalive would run as often on an idle source as on a
// busy one.
const catalogIdleInterval = 5 * time.Second

// catalogQueryTimeout bounds one catalog check or lookup, so a connection
// that hangs ends the session (which reconnects) instead of stalling the
// reader.
const catalogQueryTimeout = 5 * time.Second

// Catalog is a streaming session's view of the outbox in the system
// catalog, on a regular connection of its own. It does two things.
//
// It resolves relation messages by OID (IsOutbox): the outbox is the table
// the session started with, the table the configured name resolves to now,
// any partition of either, or a relation that carried the configured name
// when the WAL was written. So a partition, a renamed outbox and an outbox
// replaced by a partitioned table are followed, and a table that is not the
// outbox is reported, never skipped.
//
// And it fences confirmation (Watch, Fenced). A change to the catalog can
// take outbox rows out of the stream without anything in it to say so: the
// outbox replaced by a new partitioned table that the publication does not
// include, the publication altered. Such rows are never decoded, and the
// relay would confirm past them on the next commit or keepalive. So every
// catalogCheckInterval it reads pg_current_wal_lsn(), then, in a later
// snapshot, checks that the outbox's inserts are all published; the
// position read before a passing check is the fence, and no position past
// it is confirmed. A row written after a change must be inserted after the
// change committed, so after the fence of the last check that did not see
// the change. When a check fails, the session ends with the error (a
// permanent one for a mismatch): the rows written since the change were
// never confirmed.
type Catalog struct {
	cfg   *Config
	table pgname.Table
	ctx   context.Context
	// outbox is the OID of the outbox table the session follows.
	outbox atomic.Uint32
	fence  atomic.Uint64
	// wanted is the last position Fenced was asked to cap (what Kafka
	// acknowledged, or a keepalive's WAL end while nothing is in flight).
	wanted atomic.Uint64
	// read is the end of the last commit the stream read (see Read):
	// while it is past the fence, the next check is due.
	read atomic.Uint64
	// mu guards conn, version and err.
	mu      sync.Mutex
	conn    *pgx.Conn
	version int
	err     error

	stop context.CancelFunc
	done chan struct{}
}

// OpenCatalog connects, resolves the outbox table and checks the
// publication once; watch then repeats the check.
func OpenCatalog(ctx context.Context, c *Config) (*Catalog, error) {
	table, _ := pgname.Parse(c.Table, "public")
	k := &Catalog{cfg: c, table: table, ctx: ctx}
	ctx, cancel := context.WithTimeout(ctx, pgconnect.SessionStartTimeout)
	defer cancel()
	conn, err := pgconnect.Connect(ctx, c.DatabaseURL)
	if err != nil {
		return nil, err
	}
	k.conn = conn
	fail := func(err error) (*Catalog, error) {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	oid, err := TableOID(ctx, conn, table)
	if err != nil {
		return fail(err)
	}
	if oid == 0 {
		return fail(fmt.Errorf("%w: %s", relaytype.ErrTableMissing, table))
	}
	k.outbox.Store(oid)
	if k.version, err = serverVersion(ctx, conn); err != nil {
		return fail(err)
	}
	if err := k.check(ctx); err != nil {
		return fail(err)
	}
	return k, nil
}

// Watch starts checking the catalog every catalogCheckInterval until
// close while a commit read (see Read) is past the fence or the position
// to confirm is more than idleSlack past it; every catalogIdleInterval
// otherwise (a change found later then ends the session later; nothing
// past the fence is confirmed meanwhile, so an idle slot's position trails
// the server's WAL by at most idleSlack or catalogIdleInterval of it).
func (k *Catalog) Watch() {
	ctx, stop := context.WithCancel(k.ctx)
	k.stop, k.done = stop, make(chan struct{})
	go func() {
		defer close(k.done)
		t := time.NewTicker(catalogCheckInterval)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
			if !k.due() && time.Since(last) < catalogIdleInterval {
				continue
			}
			last = time.Now()
			if err := k.check(ctx); err != nil {
				return
			}
		}
	}()
}

// Close stops watch and closes the connection.
func (k *Catalog) Close() {
	if k.stop != nil {
		k.stop()
		<-k.done
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.conn.Close(context.WithoutCancel(k.ctx))
}

// Recheck moves the fence before a session's last status update, so a
// graceful stop confirms everything Kafka acknowledged.
func (k *Catalog) Recheck() {
	_ = k.check(context.WithoutCancel(k.ctx))
}

// due reports whether a check is due before catalogIdleInterval: a commit
// read past the fence, or the position to confirm idleSlack past it.
func (k *Catalog) due() bool {
	fence := k.fence.Load()
	return k.read.Load() > fence || k.wanted.Load() > fence+idleSlack
}

// Read records that the stream read a commit ending at end, so that the
// next check moves the fence past it within catalogCheckInterval and its
// confirmation does not wait for the idle one. A nil catalog does nothing.
func (k *Catalog) Read(end pglogrepl.LSN) {
	if k != nil {
		raise(&k.read, uint64(end))
	}
}

// Fenced caps a confirmable position at the fence.
func (k *Catalog) Fenced(lsn uint64) pglogrepl.LSN {
	k.wanted.Store(lsn)
	return pglogrepl.LSN(min(lsn, k.fence.Load()))
}

// Failure is the error of a failed check, nil while the checks pass.
func (k *Catalog) Failure() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// check reads the WAL position, then checks the publication against the
// outbox; it moves the fence to that position when every outbox insert is
// published. A failure sticks: the session must end.
func (k *Catalog) check(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return k.err
	}
	qctx, cancel := context.WithTimeout(ctx, catalogQueryTimeout)
	defer cancel()
	err := k.checkLocked(qctx)
	if err != nil && ctx.Err() == nil {
		k.err = err
	}
	return err
}

func (k *Catalog) checkLocked(ctx context.Context) error {
	c := k.cfg
	// Two statements of one batch, one round trip: each has its own
	// snapshot, the second taken after the position was read.
	b := &pgx.Batch{}
	var lsnText string
	b.Queue(`SELECT pg_current_wal_lsn()::text`).QueryRow(func(row pgx.Row) error { return row.Scan(&lsnText) })
	var current *uint32
	b.Queue(`SELECT to_regclass($1)::oid`, k.table.Sanitize()).QueryRow(func(row pgx.Row) error { return row.Scan(&current) })
	if err := k.conn.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("relay: check the outbox in the catalog: %w", err)
	}
	lsn, err := pglogrepl.ParseLSN(lsnText)
	if err != nil {
		return fmt.Errorf("relay: pg_current_wal_lsn %q: %w", lsnText, err)
	}
	// The table whose inserts must reach the slot: the one the configured
	// name resolves to, else (renamed) the one the session follows.
	target := Deref(current)
	if target == 0 {
		target = k.outbox.Load()
	}
	st, err := scanPublication(k.conn.QueryRow(ctx, publicationQuery(k.version), c.Publication, target), c, k.table)
	if err != nil {
		return err
	}
	switch {
	case !st.Exists:
		return relayerr.Permanent(fmt.Errorf("%w: %s was dropped while the relay streamed it", relaytype.ErrPublicationMissing, c.Publication))
	case st.Mismatch != "":
		msg := st.Mismatch
		if target != k.outbox.Load() {
			msg += fmt.Sprintf(" (the outbox table changed while the relay streamed it: %s is now OID %d, was %d)",
				k.table, target, k.outbox.Load())
		}
		return relayerr.Permanent(fmt.Errorf("%w: %s; rows written to it since the change are not in the stream and were not confirmed; "+
			"once the publication is fixed, publish them again from the table (see docs/partitioning.md)", relaytype.ErrPublicationMismatch, msg))
	}
	if uint64(lsn) > k.fence.Load() {
		k.fence.Store(uint64(lsn))
	}
	return nil
}

// IsOutbox implements relationResolver.
func (k *Catalog) IsOutbox(m *pglogrepl.RelationMessage) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var (
		current   *uint32
		exists    bool
		name      string
		ancestors []uint32
	)
	ctx, cancel := context.WithTimeout(k.ctx, catalogQueryTimeout)
	defer cancel()
	err := k.conn.QueryRow(ctx, `
		SELECT to_regclass($2)::oid, c.oid IS NOT NULL,
		       CASE WHEN c.oid IS NOT NULL THEN format('%I.%I', n.nspname, c.relname) ELSE '' END,
		       ARRAY(SELECT relid::oid FROM pg_partition_ancestors(c.oid))
		  FROM (SELECT 1) one
		  LEFT JOIN pg_class c ON c.oid = $1
		  LEFT JOIN pg_namespace n ON n.oid = c.relnamespace`, m.RelationID, k.table.Sanitize()).
		Scan(&current, &exists, &name, &ancestors)
	if err != nil {
		return false, fmt.Errorf("relay: look up relation %d in the catalog: %w", m.RelationID, err)
	}
	log := k.cfg.Logger
	followed, now := k.outbox.Load(), Deref(current)
	historic := pgname.Table{Schema: m.Namespace, Name: m.RelationName}
	switch {
	case m.RelationID == followed:
		if now != followed && exists {
			log.Warn("the outbox table was renamed; following it by OID. Set the relay's table to its new name: the relay refuses to start on a table that does not exist",
				"table", name, "oid", m.RelationID, "configured", k.table.String())
		}
		return true, nil
	case m.RelationID == now:
		log.Warn("the outbox table was replaced by a new table of the same name; following the new one",
			"table", k.table.String(), "old_oid", followed, "new_oid", now)
		k.outbox.Store(now)
		return true, nil
	case slices.Contains(ancestors, followed) || now != 0 && slices.Contains(ancestors, now):
		// A partition of the outbox. Its rows come under its own name when
		// publish_via_partition_root was off when this WAL was written, or
		// the old outbox attached as a partition of the new one; but
		// pgoutput also announces partitions published via the root (with
		// no rows under their name), so this says nothing about the setting.
		log.Debug("relation message for a partition of the outbox table; rows under its name are outbox rows", "partition", name, "oid", m.RelationID)
		return true, nil
	case historic == k.table:
		// Replayed WAL from before a rename or replacement: the relation
		// carried the outbox's name when the rows were written.
		log.Warn("replaying rows of a table that was the outbox when they were written", "then", historic.String(),
			"now", name, "oid", m.RelationID, "exists", exists)
		return true, nil
	}
	// Not the outbox. pgoutput may send a relation message without rows
	// (seen for a partition published via its root), so the decoder
	// warns at the first row.
	return false, nil
}
