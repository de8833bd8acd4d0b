package admin

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// platform is where the server seems to run, from the roles the managed
// services create.
type platform int

const (
	selfManaged platform = iota
	rds                  // Amazon RDS and Aurora: rds_superuser
	cloudSQL             // Google Cloud SQL: cloudsqlsuperuser
	azure                // Azure Database for PostgreSQL: azure_pg_admin
)

// CheckPrerequisites is relay.CheckPrerequisites (whose documentation
// lists the checks): every unmet prerequisite at once, in a
// *relaytype.PrerequisitesError, changing nothing.
func CheckPrerequisites(ctx context.Context, cfg *Config) error {
	c, conn, err := openAdmin(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return checkPrerequisites(ctx, conn, &c, false)
}

// checkPrerequisites is CheckPrerequisites on an open connection. setup
// checks for Setup, which also creates the table and its migration
// bookkeeping and never honours NoCreate.
func checkPrerequisites(ctx context.Context, conn *pgx.Conn, c *Config, setup bool) error {
	table, err := pgname.Parse(c.Table, "public")
	if err != nil {
		return fmt.Errorf("%w: %w", relaytype.ErrConfig, err)
	}
	f, err := readPrereqFacts(ctx, conn, c, table)
	if err != nil {
		return fmt.Errorf("relay: check prerequisites: %w", err)
	}
	p := &prereqCheck{
		f: f, c: c, table: table, setup: setup, creating: setup || !c.NoCreate,
		plat: map[string]platform{"rds": rds, "cloudsql": cloudSQL, "azure": azure}[f.plat],
		user: pgx.Identifier{f.user}.Sanitize(),
	}
	p.checkServer()
	p.checkSlotName()
	p.checkReplicationRole()
	p.checkCreate()
	p.checkRunRights()
	if len(p.problems) == 0 {
		return nil
	}
	return &relaytype.PrerequisitesError{Problems: p.problems}
}

// prereqFacts is what the server says about itself, the role and the
// objects of c, in one query.
type prereqFacts struct {
	walLevel                          string
	maxSlots, usedSlots               int
	maxSenders, usedSenders           int
	user, database                    string
	super, replication, rdsRepl       bool
	plat                              string
	schemaExists, schemaCreate        bool
	tableExists, tableOwner, dbCreate bool
	bookkeeping                       bool
	slotExists, slotActive, pubExists bool
	slotPlugin, slotDatabase          string // "" for a physical slot
	stateExists, stateWrite           bool
	tableSelect, tableDelete          bool
	inRecovery                        bool // a standby
}

func readPrereqFacts(ctx context.Context, conn *pgx.Conn, c *Config, table pgname.Table) (prereqFacts, error) {
	var s prereqFacts
	err := conn.QueryRow(ctx, `
		SELECT current_setting('wal_level'),
			current_setting('max_replication_slots')::int,
			(SELECT count(*) FROM pg_replication_slots)::int,
			current_setting('max_wal_senders')::int,
			(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender')::int,
			current_user, current_database(),
			r.rolsuper, r.rolreplication,
			EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rds_replication')
				AND pg_has_role(current_user, 'rds_replication', 'MEMBER'),
			CASE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rds_superuser') THEN 'rds'
				WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cloudsqlsuperuser') THEN 'cloudsql'
				WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'azure_pg_admin') THEN 'azure'
				ELSE '' END,
			n.oid IS NOT NULL,
			n.oid IS NOT NULL AND has_schema_privilege(n.oid, 'CREATE'),
			t.oid IS NOT NULL,
			t.oid IS NOT NULL AND pg_has_role(current_user, t.relowner, 'USAGE'),
			has_database_privilege(current_database(), 'CREATE'),
			n.oid IS NOT NULL AND EXISTS (SELECT 1 FROM pg_class b WHERE b.relnamespace = n.oid AND b.relname = 'pgoutbox_migration'),
			EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $3),
			EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $3 AND active),
			EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $4),
			coalesce((SELECT plugin::text FROM pg_replication_slots WHERE slot_name = $3), ''),
			coalesce((SELECT database::text FROM pg_replication_slots WHERE slot_name = $3), ''),
			st.oid IS NOT NULL,
			st.oid IS NOT NULL AND has_table_privilege(st.oid, 'SELECT, INSERT, UPDATE'),
			t.oid IS NOT NULL AND has_table_privilege(t.oid, 'SELECT'),
			t.oid IS NOT NULL AND has_table_privilege(t.oid, 'DELETE'),
			pg_is_in_recovery()
		FROM pg_roles r
		LEFT JOIN pg_namespace n ON n.nspname = $1
		LEFT JOIN pg_class t ON t.relnamespace = n.oid AND t.relname = $2
		LEFT JOIN pg_class st ON st.relnamespace = n.oid AND st.relname = $5
		WHERE r.rolname = current_user`,
		table.Schema, table.Name, c.Slot, c.Publication, relaytype.StateTableName).Scan(
		&s.walLevel, &s.maxSlots, &s.usedSlots, &s.maxSenders, &s.usedSenders,
		&s.user, &s.database, &s.super, &s.replication, &s.rdsRepl, &s.plat,
		&s.schemaExists, &s.schemaCreate, &s.tableExists, &s.tableOwner, &s.dbCreate,
		&s.bookkeeping, &s.slotExists, &s.slotActive, &s.pubExists, &s.slotPlugin, &s.slotDatabase,
		&s.stateExists, &s.stateWrite, &s.tableSelect, &s.tableDelete, &s.inRecovery)
	return s, err
}

// prereqCheck turns prereqFacts into Problems.
type prereqCheck struct {
	f        prereqFacts
	c        *Config
	table    pgname.Table
	setup    bool // checking for Setup
	creating bool // a missing publication or slot would be created
	plat     platform
	user     string // the role, quoted for a statement
	problems []relaytype.Problem
}

func (p *prereqCheck) add(check, detail, fix string) {
	p.problems = append(p.problems, relaytype.Problem{Check: check, Detail: detail, Fix: fix})
}

// checkServer checks the settings: wal_level, free slots, free WAL senders.
func (p *prereqCheck) checkServer() {
	s := p.f
	if s.inRecovery {
		// PG 16 decodes on a standby, but the relay writes its state row
		// (and creates the slot's history) where it reads: not yet.
		p.add("primary", "the server is a standby (in recovery): the relay reads and writes its state on the primary; "+
			"reading from a standby (PostgreSQL 16+ logical decoding on a standby) is not supported yet",
			"point --database-url at the primary, or list every host with target_session_attrs=read-write "+
				"(postgres://relay@a:5432,b:5432/app?target_session_attrs=read-write)")
	}
	if s.walLevel != "logical" {
		p.add("wal_level", fmt.Sprintf("wal_level is %s; logical decoding needs logical", s.walLevel), walLevelFix(p.plat))
	}
	if !s.slotExists && p.creating && s.usedSlots >= s.maxSlots {
		p.add("replication slots", fmt.Sprintf("all %d replication slots are in use (max_replication_slots)", s.maxSlots),
			settingFix(p.plat, "max_replication_slots", s.maxSlots+4))
	}
	if !s.slotActive && s.usedSenders >= s.maxSenders {
		p.add("wal senders", fmt.Sprintf("all %d WAL senders are in use (max_wal_senders)", s.maxSenders),
			settingFix(p.plat, "max_wal_senders", s.maxSenders+4))
	}
}

// checkSlotName checks that the slot name is free or names a pgoutput slot
// of this database: slot names are cluster-wide, so a slot of another
// database (or a physical one) takes the name from every database.
func (p *prereqCheck) checkSlotName() {
	s := p.f
	if !s.slotExists || (s.slotPlugin == "pgoutput" && s.slotDatabase == s.database) {
		return
	}
	what := fmt.Sprintf("a slot of database %s with plugin %s", s.slotDatabase, s.slotPlugin)
	if s.slotDatabase == "" {
		what = "a physical slot"
	}
	p.add("slot name", fmt.Sprintf("replication slot %s is %s; slot names are shared by every database of the server", p.c.Slot, what),
		fmt.Sprintf("choose another name with --slot (e.g. --slot %s_%s), or drop that slot if nothing uses it: SELECT pg_drop_replication_slot('%s');",
			p.c.Slot, s.database, p.c.Slot))
}

// checkReplicationRole checks that the role may stream replication.
func (p *prereqCheck) checkReplicationRole() {
	s := p.f
	if s.super || s.replication || s.rdsRepl {
		return
	}
	fix := "ALTER ROLE " + p.user + " WITH REPLICATION; (as a superuser)"
	switch p.plat {
	case rds:
		fix = "GRANT rds_replication TO " + p.user + "; (as the master user)"
	case cloudSQL:
		fix = "ALTER ROLE " + p.user + " WITH REPLICATION; (as a cloudsqlsuperuser, e.g. the postgres user)"
	case azure:
		fix = "ALTER ROLE " + p.user + " WITH REPLICATION; (as the azure_pg_admin administrator)"
	}
	p.add("replication role", fmt.Sprintf("role %s may not stream replication (no REPLICATION attribute)", s.user), fix)
}

// checkCreate checks what creating the schema's objects needs: the schema,
// CREATE on it for the table and the migration bookkeeping (setup only),
// CREATE on the database and ownership of the table for a new publication.
func (p *prereqCheck) checkCreate() {
	s, table, user := p.f, p.table, p.user
	schema := pgx.Identifier{table.Schema}.Sanitize()
	switch {
	case !s.schemaExists && p.setup:
		p.add("create", fmt.Sprintf("schema %s does not exist", table.Schema),
			"CREATE SCHEMA "+schema+" AUTHORIZATION "+user+";")
	case p.setup && (!s.tableExists || !s.bookkeeping) && !s.schemaCreate && !s.super:
		what := "table " + table.String()
		if s.tableExists {
			what = "migration bookkeeping table " + table.Schema + ".pgoutbox_migration"
		}
		p.add("create", fmt.Sprintf("role %s may not create the %s (no CREATE on schema %s)", s.user, what, table.Schema),
			"GRANT CREATE ON SCHEMA "+schema+" TO "+user+";")
	}
	if !p.creating || s.pubExists {
		return
	}
	if !s.dbCreate && !s.super {
		p.add("create", fmt.Sprintf("role %s may not create publication %s (no CREATE on database %s)", s.user, p.c.Publication, s.database),
			"GRANT CREATE ON DATABASE "+pgx.Identifier{s.database}.Sanitize()+" TO "+user+";")
	}
	if s.tableExists && !s.tableOwner && !s.super {
		p.add("table owner", fmt.Sprintf("role %s does not own %s, which CREATE PUBLICATION requires", s.user, table),
			"ALTER TABLE "+table.Sanitize()+" OWNER TO "+user+"; (or let the owner run relay setup once)")
	}
}

// checkRunRights checks what relay run does as this role once streaming:
// record its position in the state table (without it confirmation
// stalls), read the table to recover a gap, delete published rows to
// prune.
func (p *prereqCheck) checkRunRights() {
	s, table, user := p.f, p.table, p.user
	if s.super {
		return
	}
	if s.stateExists && !s.stateWrite {
		st := slotstate.StateTable(&p.c.Config)
		p.add("state table", fmt.Sprintf("role %s may not write the relay state table %s (SELECT, INSERT, UPDATE)", s.user, st),
			"GRANT SELECT, INSERT, UPDATE ON "+st.Sanitize()+" TO "+user+";")
	}
	if s.tableExists && p.c.BackfillOnGap && !s.tableSelect {
		p.add("table rights", fmt.Sprintf("role %s may not read %s, which --on-gap=backfill needs", s.user, table),
			"GRANT SELECT ON "+table.Sanitize()+" TO "+user+";")
	}
	if s.tableExists && p.c.PruneAfter > 0 && (!s.tableDelete || !s.tableSelect) {
		p.add("table rights", fmt.Sprintf("role %s may not delete from %s, which --prune-after needs", s.user, table),
			"GRANT SELECT, DELETE ON "+table.Sanitize()+" TO "+user+";")
	}
}

// walLevelFix is how to turn on logical decoding on plat.
func walLevelFix(plat platform) string {
	switch plat {
	case rds:
		return "set rds.logical_replication = 1 in the DB (cluster) parameter group and reboot the instance"
	case cloudSQL:
		return "gcloud sql instances patch INSTANCE --database-flags=cloudsql.logical_decoding=on (restarts the instance)"
	case azure:
		return "az postgres flexible-server parameter set --resource-group RG --server-name SERVER --name wal_level --value logical, then restart the server"
	}
	return "ALTER SYSTEM SET wal_level = logical; then restart Postgres (managed services: RDS rds.logical_replication = 1, Cloud SQL cloudsql.logical_decoding = on, Azure server parameter wal_level = logical)"
}

// settingFix is how to raise a restart-only setting to n on plat.
func settingFix(plat platform, name string, n int) string {
	switch plat {
	case rds:
		return fmt.Sprintf("set %s = %d in the DB parameter group and reboot the instance", name, n)
	case cloudSQL:
		return fmt.Sprintf("gcloud sql instances patch INSTANCE --database-flags=%s=%d", name, n)
	case azure:
		return fmt.Sprintf("az postgres flexible-server parameter set --name %s --value %d, then restart the server", name, n)
	}
	return fmt.Sprintf("ALTER SYSTEM SET %s = %d; then restart Postgres", name, n)
}
