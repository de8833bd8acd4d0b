package slotstate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// PublicationState is what the catalog says about the publication and the
// outbox table it should publish.
type PublicationState struct {
	Exists bool
	// Mismatch says why outbox rows could miss the stream (the table is not
	// published, inserts are not, a row filter or column list); empty when
	// every outbox insert reaches the relay. The catalog watch stops the
	// relay on it.
	Mismatch string
	// foreign names the tables the publication publishes besides the
	// outbox and its partitions; the relay refuses to start on them, and
	// dead-letters (or stops on) rows of such a table added while it
	// streams.
	foreign []string
	// allTables is set for a FOR ALL TABLES publication.
	allTables bool
	// viaRoot is publish_via_partition_root; partitioned says the outbox
	// table is partitioned.
	viaRoot, partitioned bool
	// Extra says what it publishes beyond the outbox inserts that costs
	// decoding but loses nothing (updates, deletes, truncates).
	Extra string
}

// problem says why the relay must not start on this publication: mismatch,
// foreign tables, or a partitioned outbox published under its partitions'
// names. Empty when it may.
func (st *PublicationState) problem(c *Config, table pgname.Table) string {
	pub := pgx.Identifier{c.Publication}.Sanitize()
	switch {
	case st.Mismatch != "":
		return st.Mismatch
	case st.allTables:
		return fmt.Sprintf("publication %s publishes all tables, not only the outbox: the relay needs a publication of its own "+
			"(DROP PUBLICATION %s, then relay setup)", c.Publication, pub)
	case len(st.foreign) > 0:
		return fmt.Sprintf("publication %s also publishes %s, which is not the outbox: ALTER PUBLICATION %s DROP TABLE %s",
			c.Publication, strings.Join(st.foreign, ", "), pub, strings.Join(st.foreign, ", "))
	case st.partitioned && !st.viaRoot:
		return fmt.Sprintf("publication %s publishes the partitions of %s under their own names: %s (or run relay setup)",
			c.Publication, table, viaRootFix(c))
	}
	return ""
}

// viaRootFix is the statement that turns publish_via_partition_root on.
func viaRootFix(c *Config) string {
	return `ALTER PUBLICATION ` + pgx.Identifier{c.Publication}.Sanitize() + ` SET (publish_via_partition_root = true)`
}

// serverVersion returns server_version_num.
func serverVersion(ctx context.Context, conn *pgx.Conn) (int, error) {
	var v int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&v); err != nil {
		return 0, fmt.Errorf("relay: read server version: %w", err)
	}
	return v, nil
}

// TableOID resolves the configured outbox table; 0 when it does not exist.
func TableOID(ctx context.Context, conn *pgx.Conn, table pgname.Table) (uint32, error) {
	var oid *uint32
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1)::oid`, table.Sanitize()).Scan(&oid); err != nil {
		return 0, fmt.Errorf("relay: look up table %s: %w", table, err)
	}
	return Deref(oid), nil
}

// publicationQuery reads the publication and how it covers the table of
// OID $2 ($1 is the publication's name). A listed relation belongs to the
// outbox when it is the outbox or the outbox is among its partition
// ancestors. The outbox is covered when every leaf of it (the table itself
// when it is not partitioned) is listed or has a listed ancestor: one
// published partition of an unpublished partitioned outbox is not enough.
func publicationQuery(version int) string {
	viaRoot, filtered, columns := "false", "false", "false"
	if version >= 130000 {
		viaRoot = "p.pubviaroot"
	}
	if version >= 150000 {
		member := `pr.prpubid = p.oid AND (pr.prrelid = $2 OR EXISTS (SELECT 1 FROM pg_partition_ancestors(pr.prrelid) a WHERE a.relid = $2))`
		filtered = `EXISTS (SELECT 1 FROM pg_publication_rel pr WHERE ` + member + ` AND pr.prqual IS NOT NULL)`
		columns = `EXISTS (SELECT 1 FROM pg_publication_rel pr WHERE ` + member + ` AND pr.prattrs IS NOT NULL)`
	}
	// The relations the publication publishes, by OID (pg_publication_tables
	// would join all of pg_class to name them): the function returns a
	// bare oid before PG 15, a record with relid since.
	relids := `SELECT relid FROM pg_get_publication_tables($1::text) AS relid`
	if version >= 150000 {
		relids = `SELECT t.relid FROM pg_get_publication_tables($1::text) AS t`
	}
	return `
		WITH listed AS (
			SELECT r.relid, r.relid = $2 OR EXISTS (SELECT 1 FROM pg_partition_ancestors(r.relid) a WHERE a.relid = $2) AS outbox
			  FROM (` + relids + `) r),
		leaves AS (
			SELECT $2::oid AS relid WHERE NOT EXISTS (SELECT 1 FROM pg_partition_tree($2::oid::regclass))
			UNION ALL
			SELECT relid FROM pg_partition_tree($2::oid::regclass) WHERE isleaf)
		SELECT p.puballtables, p.pubinsert, p.pubupdate, p.pubdelete, p.pubtruncate, ` + viaRoot + `,
		       coalesce((SELECT relkind = 'p' FROM pg_class WHERE oid = $2), false),
		       $2::oid <> 0 AND NOT EXISTS (
		           SELECT 1 FROM leaves l WHERE NOT EXISTS (
		               SELECT 1 FROM listed WHERE listed.relid = l.relid
		                   OR listed.relid IN (SELECT relid FROM pg_partition_ancestors(l.relid)))),
		       ARRAY(SELECT format('%I.%I', n.nspname, c.relname) FROM listed l
		               JOIN pg_class c ON c.oid = l.relid JOIN pg_namespace n ON n.oid = c.relnamespace
		              WHERE NOT l.outbox ORDER BY 1 LIMIT 10),
		       ` + filtered + `, ` + columns + `
		  FROM pg_publication p WHERE p.pubname = $1`
}

// InspectPublication reads the publication against the configured outbox
// table, for Status: its mismatch is every reason the relay would refuse
// to start (see problem).
func InspectPublication(ctx context.Context, conn *pgx.Conn, c *Config) (PublicationState, error) {
	table, _ := pgname.Parse(c.Table, "public")
	oid, err := TableOID(ctx, conn, table)
	if err != nil {
		return PublicationState{}, err
	}
	version, err := serverVersion(ctx, conn)
	if err != nil {
		return PublicationState{}, err
	}
	st, err := scanPublication(conn.QueryRow(ctx, publicationQuery(version), c.Publication, oid), c, table)
	switch {
	case err != nil || !st.Exists:
	case oid == 0:
		st.Mismatch = fmt.Sprintf("table %s does not exist (run relay setup)", table)
	default:
		st.Mismatch = st.problem(c, table)
	}
	return st, err
}

// scanPublication reads a row of publicationQuery.
func scanPublication(row pgx.Row, c *Config, table pgname.Table) (PublicationState, error) {
	var (
		st                                     PublicationState
		ins, upd, del, trunc, listed, filtered bool
		columns                                bool
	)
	err := row.Scan(&st.allTables, &ins, &upd, &del, &trunc, &st.viaRoot, &st.partitioned, &listed, &st.foreign, &filtered, &columns)
	if errors.Is(err, pgx.ErrNoRows) {
		return PublicationState{}, nil
	}
	if err != nil {
		return st, fmt.Errorf("relay: read publication %s: %w", c.Publication, err)
	}
	st.Exists = true
	set := `ALTER PUBLICATION ` + pgx.Identifier{c.Publication}.Sanitize() + ` SET TABLE ` + table.Sanitize()
	switch {
	case !listed:
		st.Mismatch = fmt.Sprintf("publication %s does not include table %s", c.Publication, table)
	case !ins:
		st.Mismatch = fmt.Sprintf("publication %s does not publish inserts", c.Publication)
	case filtered:
		st.Mismatch = fmt.Sprintf("publication %s has a row filter on %s: rows outside it would never reach the relay: %s",
			c.Publication, table, set)
	case columns:
		st.Mismatch = fmt.Sprintf("publication %s has a column list on %s: the relay needs every column: %s",
			c.Publication, table, set)
	}
	var ops []string
	for _, op := range []struct {
		on   bool
		name string
	}{{upd, "update"}, {del, "delete"}, {trunc, "truncate"}} {
		if op.on {
			ops = append(ops, op.name)
		}
	}
	if len(ops) > 0 {
		st.Extra = "publishes " + strings.Join(ops, ", ")
	}
	return st, nil
}

// EnsurePublication checks the publication and creates it when missing
// (unless c.NoCreate). With fix (relay setup) it turns
// publish_via_partition_root on where it is off; without, it reports the
// statement that does (an error for a partitioned outbox, a warning for a
// plain one).
func EnsurePublication(ctx context.Context, conn *pgx.Conn, c *Config, fix bool) error {
	table, _ := pgname.Parse(c.Table, "public")
	oid, err := TableOID(ctx, conn, table)
	if err != nil {
		return err
	}
	if oid == 0 {
		return fmt.Errorf("%w: %s (run relay setup)", relaytype.ErrTableMissing, table)
	}
	version, err := serverVersion(ctx, conn)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		st, err := scanPublication(conn.QueryRow(ctx, publicationQuery(version), c.Publication, oid), c, table)
		if err != nil {
			return err
		}
		if st.Exists {
			return checkPublication(ctx, conn, c, table, version, st, fix)
		}
		if c.NoCreate {
			return fmt.Errorf("%w: %s (run relay setup, or allow creation)", relaytype.ErrPublicationMissing, c.Publication)
		}
		if created, err := createPublication(ctx, conn, c, table, version, attempt); err != nil || created {
			return err
		}
	}
}

// CheckPublicationForSetup reads the publication c names, when it exists
// (and the outbox table does), and reports a mismatch relay setup could
// not fix; it changes nothing and logs nothing: what setup checks before
// it creates anything.
func CheckPublicationForSetup(ctx context.Context, conn *pgx.Conn, c *Config) error {
	table, _ := pgname.Parse(c.Table, "public")
	oid, err := TableOID(ctx, conn, table)
	if err != nil || oid == 0 {
		return err
	}
	version, err := serverVersion(ctx, conn)
	if err != nil {
		return err
	}
	st, err := scanPublication(conn.QueryRow(ctx, publicationQuery(version), c.Publication, oid), c, table)
	if err != nil || !st.Exists {
		return err
	}
	if viaRootFixable(st, version) {
		st.viaRoot = true // setup turns it on
	}
	if p := st.problem(c, table); p != "" {
		return fmt.Errorf("%w: %s", relaytype.ErrPublicationMismatch, p)
	}
	return nil
}

// viaRootFixable says whether setup turns publish_via_partition_root on
// for st: it is off, the server has it (13+), and the publication is
// otherwise the outbox's.
func viaRootFixable(st PublicationState, version int) bool {
	return !st.viaRoot && version >= 130000 && st.Mismatch == "" && !st.allTables && len(st.foreign) == 0
}

// checkPublication checks an existing publication: with fix it first turns
// publish_via_partition_root on where it can; a mismatch is an error,
// publish_via_partition_root off and more than the outbox inserts are
// warnings.
func checkPublication(ctx context.Context, conn *pgx.Conn, c *Config, table pgname.Table, version int, st PublicationState, fix bool) error {
	if fix && viaRootFixable(st, version) {
		if _, err := conn.Exec(ctx, viaRootFix(c)); err != nil {
			return fmt.Errorf("relay: set publish_via_partition_root on publication %s: %w", c.Publication, err)
		}
		c.Logger.Info("set publish_via_partition_root on the publication", "publication", c.Publication)
		st.viaRoot = true
	}
	if p := st.problem(c, table); p != "" {
		return fmt.Errorf("%w: %s", relaytype.ErrPublicationMismatch, p)
	}
	if !st.viaRoot && version >= 130000 {
		c.Logger.Warn("publication has publish_via_partition_root off; turn it on before partitioning the outbox table (relay setup does)",
			"publication", c.Publication, "fix", viaRootFix(c))
	}
	if st.Extra != "" {
		c.Logger.Warn("publication covers more than the outbox inserts; the relay ignores the rest, but the server still decodes and sends it",
			"publication", c.Publication, "extra", st.Extra)
	}
	return nil
}

// createPublication creates the publication for the outbox inserts. On the
// first attempt one created concurrently is no error: created is false, and
// the caller reads it again.
func createPublication(ctx context.Context, conn *pgx.Conn, c *Config, table pgname.Table, version, attempt int) (created bool, err error) {
	with := `publish = 'insert'`
	if version >= 130000 {
		// Rows of a partitioned outbox then come under the table's own
		// identity, whatever partition holds them.
		with += `, publish_via_partition_root = true`
	}
	_, err = conn.Exec(ctx, `CREATE PUBLICATION `+pgx.Identifier{c.Publication}.Sanitize()+
		` FOR TABLE `+table.Sanitize()+` WITH (`+with+`)`)
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42710" && attempt == 0) { // created concurrently
		return false, fmt.Errorf("relay: create publication %s: %w", c.Publication, err)
	}
	if err == nil {
		c.Logger.Info("created publication", "publication", c.Publication, "table", table.String())
		return true, nil
	}
	return false, nil
}

// CheckTable validates the outbox table's columns from the catalog against
// c.TableFormat, and that pruning has the creation time column it needs.
func CheckTable(ctx context.Context, conn *pgx.Conn, c *Config) error {
	table, _ := pgname.Parse(c.Table, "public")
	names, types, err := ReadColumns(ctx, conn, table)
	if err != nil {
		return fmt.Errorf("relay: read columns of %s: %w", table, err)
	}
	if len(names) == 0 {
		return fmt.Errorf("%w: %s", relaytype.ErrTableMissing, table)
	}
	l, err := decode.CheckColumns(table.String(), c.TableFormat, names, types)
	if err == nil && c.PruneAfter > 0 {
		err = CheckCreatedAt(table, &l, names)
	}
	return err
}

// ReadColumns reads the names and type OIDs of table's columns, in order,
// from the catalog (on a connection, or in a backfill's snapshot).
func ReadColumns(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, table pgname.Table) (names []string, types []uint32, err error) {
	rows, err := q.Query(ctx, `SELECT attname, atttypid FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, table.Sanitize())
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		var t uint32
		if err := rows.Scan(&n, &t); err != nil {
			return nil, nil, err
		}
		names, types = append(names, n), append(types, t)
	}
	return names, types, rows.Err()
}

// CheckCreatedAt says why the table cannot be backfilled or pruned: it has
// no creation time column.
func CheckCreatedAt(table pgname.Table, l *decode.Layout, names []string) error {
	if !tableformat.HasColumn(names, l.Shape.CreatedAt) {
		return fmt.Errorf("%w: %s: backfill and pruning need column %s (a timestamptz set at insert)",
			relaytype.ErrTableColumns, table, l.Shape.CreatedAt)
	}
	return nil
}
