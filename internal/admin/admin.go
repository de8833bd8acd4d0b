package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
	"github.com/pgoutbox/pgoutbox/internal/migrate"
	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/sink"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Setup is relay.Setup, whose documentation holds the contract: the table
// (created, or checked against its format), the publication and the slot,
// each idempotently, after the prerequisites pass.
func Setup(ctx context.Context, cfg *Config) error {
	c, conn, err := openAdmin(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := checkPrerequisites(ctx, conn, &c, true); err != nil {
		return err // nothing created: every problem at once, each with its fix
	}
	if err := checkExistingPublication(ctx, conn, &c); err != nil {
		return err // nothing created either
	}
	if err := setupTable(ctx, conn, &c); err != nil {
		return err
	}
	c.NoCreate = false
	if err := slotstate.EnsurePublication(ctx, conn, &c.Config, true); err != nil {
		return err
	}
	_, _, err = slotstate.EnsureSlot(ctx, conn, &c.Config, true)
	return err
}

// checkExistingPublication checks, before setup creates anything, that a
// publication of the configured name that exists already will do: one
// that publishes all tables, or other tables, or not the outbox, would
// only be refused after the table and the state table were made.
func checkExistingPublication(ctx context.Context, conn *pgx.Conn, c *Config) error {
	table, _ := pgname.Parse(c.Table, "public")
	oid, err := slotstate.TableOID(ctx, conn, table)
	if err != nil {
		return err
	}
	if oid == 0 {
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, c.Publication).Scan(&exists); err != nil {
			return fmt.Errorf("relay: look up publication %s: %w", c.Publication, err)
		}
		if exists {
			return fmt.Errorf("%w: publication %s exists, and table %s does not: the publication is not the outbox's; "+
				"the relay needs a publication of its own (DROP PUBLICATION %s, or another --publication, then relay setup)",
				relaytype.ErrPublicationMismatch, c.Publication, table, pgx.Identifier{c.Publication}.Sanitize())
		}
		return nil
	}
	return slotstate.CheckPublicationForSetup(ctx, conn, &c.Config)
}

// foreignSlot says whose the existing slot named slot is when it is not a
// pgoutput slot of the connected database: slot names are per server, so
// a source on another database of the server may hold the name. Empty
// when it is this database's.
func foreignSlot(ctx context.Context, conn *pgx.Conn, slot string) (string, error) {
	var db, plugin *string
	var mine bool
	err := conn.QueryRow(ctx, `SELECT database::text, plugin::text, database IS NOT DISTINCT FROM current_database() AND plugin IS NOT DISTINCT FROM 'pgoutput'
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&db, &plugin, &mine)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || err == nil && mine:
		return "", nil
	case err != nil:
		return "", fmt.Errorf("relay: read slot %s: %w", slot, err)
	case db == nil:
		return "a physical slot", nil
	}
	return fmt.Sprintf("database %s, plugin %s", *db, slotstate.Deref(plugin)), nil
}

// setupTable creates or upgrades the outbox table of the pgoutbox format,
// or checks the existing table of another format and creates the relay
// state table next to it. An existing table is checked before any
// migration runs: a table of another shape is never altered.
func setupTable(ctx context.Context, conn *pgx.Conn, c *Config) error {
	table, _ := pgname.Parse(c.Table, "public")
	oid, err := slotstate.TableOID(ctx, conn, table)
	if err != nil {
		return err
	}
	if oid != 0 {
		if err := slotstate.CheckTable(ctx, conn, &c.Config); err != nil {
			return err
		}
	}
	if tableformat.Shape(c.TableFormat).CreatesTable {
		if _, err := migrate.Outbox(ctx, dbdriver.PgxDB(conn), c.Table); err != nil {
			return fmt.Errorf("relay: create table %s: %w", c.Table, err)
		}
		return nil
	}
	if oid == 0 {
		return fmt.Errorf("%w: %s (with table format %s, relay setup does not create the table: create it as the %s tool expects, "+
			"or use the pgoutbox format)", relaytype.ErrTableMissing, table, c.TableFormat, c.TableFormat)
	}
	if err := migrate.RelayState(ctx, dbdriver.PgxDB(conn), c.Table); err != nil {
		return fmt.Errorf("relay: create %s: %w", slotstate.StateTable(&c.Config), err)
	}
	return nil
}

// Status is relay.Status: the slot, publication, table and state as the
// database holds them and, with ExactlyOnce, the progress Kafka holds.
func Status(ctx context.Context, cfg *Config) (*relaytype.SlotStatus, error) {
	c, conn, err := openAdmin(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	table, _ := pgname.Parse(c.Table, "public")
	st := &relaytype.SlotStatus{Slot: c.Slot, Publication: c.Publication, Table: table.String()}
	row, err := slotstate.ReadSlot(ctx, conn, c.Slot)
	if err != nil {
		return nil, err
	}
	if row.Exists {
		if st.ForeignSlot, err = foreignSlot(ctx, conn, c.Slot); err != nil {
			return nil, err
		}
		if st.ForeignSlot != "" {
			row = slotstate.SlotRow{CurrentWAL: row.CurrentWAL} // not this relay's slot
		}
	}
	st.SlotExists = row.Exists
	st.Active = row.Active
	st.ActivePID = row.ActivePID
	st.ConfirmedFlushLSN = slotstate.Deref(row.Confirmed)
	st.RestartLSN = slotstate.Deref(row.Restart)
	st.CurrentWALLSN = row.CurrentWAL
	st.LagBytes = slotstate.Deref(row.Lag)
	st.RetainedWALBytes = slotstate.Deref(row.Retained)
	st.WALStatus = slotstate.Deref(row.WALStatus)
	st.SafeWALSize = row.SafeWALSize
	st.InvalidationReason = row.Invalidation
	st.InactiveStandbySlots = row.StandbyWait
	st.ActiveApplicationName = slotstate.Deref(row.AppName)
	st.ActiveClientAddr = slotstate.Deref(row.ClientAddr)
	st.ActiveState = slotstate.Deref(row.State)
	st.ActiveBackendStart = row.BackendStart
	st.ActiveReplyTime = row.ReplyTime
	pub, err := slotstate.InspectPublication(ctx, conn, &c.Config)
	if err != nil {
		return nil, err
	}
	st.PublicationExists = pub.Exists
	st.PublicationMismatch, st.PublicationExtra = pub.Mismatch, pub.Extra
	peers, err := slotstate.PeerSlots(ctx, conn, &c.Config)
	if err != nil {
		return nil, err
	}
	for _, p := range peers {
		st.OtherSlots = append(st.OtherSlots, p.String())
	}
	if err := statusHealth(ctx, conn, &c, st); err != nil {
		return nil, err
	}
	if c.ExactlyOnce {
		st.Progress = progressStatus(ctx, conn, &c)
		if st.Progress.Error != "" {
			st.Problems = append(st.Problems, "exactly-once progress: "+st.Progress.Error)
		}
	}
	return st, nil
}

// Teardown is relay.Teardown, or relay.TeardownSlot when slotOnly: it
// refuses an active slot (ErrSlotActive) and, without slotOnly, a
// publication another slot uses (ErrPublicationInUse, dropping nothing).
func Teardown(ctx context.Context, cfg *Config, slotOnly bool) error {
	c, conn, err := openAdmin(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if !slotOnly {
		if err := publicationFree(ctx, conn, &c); err != nil {
			return err
		}
	}
	var pid *int32
	err = conn.QueryRow(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, c.Slot).Scan(&pid)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("relay: read slot %s: %w", c.Slot, err)
	case pid != nil:
		return fmt.Errorf("%w: slot %s is streamed by backend %d; stop the relay first", relaytype.ErrSlotActive, c.Slot, *pid)
	default:
		if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, c.Slot); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "55006" { // object_in_use
				return fmt.Errorf("%w: slot %s: %s", relaytype.ErrSlotActive, c.Slot, pgErr.Message)
			}
			if !(errors.As(err, &pgErr) && pgErr.Code == "42704") { // dropped meanwhile
				return fmt.Errorf("relay: drop slot %s: %w", c.Slot, err)
			}
		}
	}
	// Without its slot the state row would read as a gap at the next
	// setup: teardown gives the position up on purpose.
	if _, err := conn.Exec(ctx, `DELETE FROM `+slotstate.StateTable(&c.Config).Sanitize()+` WHERE slot_name = $1`, c.Slot); err != nil {
		var pgErr *pgconn.PgError
		if !(errors.As(err, &pgErr) && pgErr.Code == "42P01") { // no state table: nothing to forget
			return fmt.Errorf("relay: delete state of slot %s: %w", c.Slot, err)
		}
	}
	if slotOnly {
		return nil
	}
	if _, err := conn.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{c.Publication}.Sanitize()); err != nil {
		return fmt.Errorf("relay: drop publication %s: %w", c.Publication, err)
	}
	return nil
}

// publicationFree returns an error wrapping ErrPublicationInUse when
// another slot streams c.Publication or may relay the outbox with it.
// Dropping it under a streaming relay stops that relay for good: the
// slot's history predates any publication created again (see
// relaytype.GapPublicationRecreated).
func publicationFree(ctx context.Context, conn *pgx.Conn, c *Config) error {
	peers, err := slotstate.PeerSlots(ctx, conn, &c.Config)
	if err != nil {
		return err
	}
	var users []slotstate.PeerSlot
	for _, p := range peers {
		if p.Uses(c.Publication) {
			users = append(users, p)
		}
	}
	if len(users) == 0 {
		return nil
	}
	return fmt.Errorf("%w: publication %s is used by slot %s; nothing dropped. To drop slot %s alone: %s",
		relaytype.ErrPublicationInUse, c.Publication, slotstate.PeerNames(users), c.Slot, slotstate.TeardownSlotOnly(c.Slot))
}

// openAdmin copies cfg (a call may change its copy) and connects.
func openAdmin(ctx context.Context, cfg *Config) (Config, *pgx.Conn, error) {
	conn, err := pgconnect.Connect(ctx, cfg.DatabaseURL)
	return *cfg, conn, err
}

// progressStatus reads the exactly-once progress of c's slot from Kafka,
// judged against its state row and the server's WAL.
func progressStatus(ctx context.Context, conn *pgx.Conn, c *Config) *relaytype.ProgressStatus {
	fail := func(err error) *relaytype.ProgressStatus {
		return &relaytype.ProgressStatus{Topic: c.Sink.ProgressTopic, Error: err.Error()}
	}
	if c.KafkaErr != nil {
		return fail(c.KafkaErr)
	}
	rs, err := slotstate.ReadState(ctx, conn, &c.Config)
	switch {
	case err != nil:
		return fail(err)
	case rs == nil:
		return fail(fmt.Errorf("slot %s has no state row: no progress is trusted without one", c.Slot))
	}
	h := sink.History{SystemID: rs.SystemID, Timeline: rs.Timeline, SlotCreatedLSN: rs.CreatedLSN, Incarnation: rs.Incarnation}
	// The bounds are read after the progress (see ReadProgressStatus).
	return sink.ReadProgressStatus(ctx, &c.Sink, h, func() (pglogrepl.LSN, pglogrepl.LSN, error) {
		_, walEnd, err := slotstate.IdentifyAt(ctx, &c.Config)
		if err != nil {
			return 0, 0, err
		}
		after, err := slotstate.ReadState(ctx, conn, &c.Config)
		if err != nil || after == nil {
			return 0, 0, cmp.Or(err, fmt.Errorf("slot %s lost its state row", c.Slot))
		}
		return walEnd, after.Ceiling, nil
	})
}
