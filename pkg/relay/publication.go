package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/internal/pgname"
)

// publicationState is what the catalog says about the publication.
type publicationState struct {
	exists bool
	// mismatch says why the publication cannot feed the relay; empty when
	// it can.
	mismatch string
	// extra says what it publishes beyond the outbox inserts (which the
	// relay ignores, but the server still decodes and sends).
	extra string
}

func inspectPublication(ctx context.Context, conn *pgx.Conn, c *Config) (publicationState, error) {
	table, _ := pgname.Parse(c.Table, "public")
	var (
		st                                        publicationState
		allTables, ins, upd, del, trunc, hasTable bool
		tables                                    int
	)
	err := conn.QueryRow(ctx, `
		SELECT p.puballtables, p.pubinsert, p.pubupdate, p.pubdelete, p.pubtruncate,
		       EXISTS (SELECT 1 FROM pg_publication_tables t WHERE t.pubname = p.pubname AND t.schemaname = $2 AND t.tablename = $3),
		       (SELECT count(*) FROM pg_publication_tables t WHERE t.pubname = p.pubname)
		  FROM pg_publication p WHERE p.pubname = $1`, c.Publication, table.Schema, table.Name).
		Scan(&allTables, &ins, &upd, &del, &trunc, &hasTable, &tables)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("relay: read publication %s: %w", c.Publication, err)
	}
	st.exists = true
	switch {
	case !hasTable:
		st.mismatch = fmt.Sprintf("publication %s does not include table %s", c.Publication, table)
	case !ins:
		st.mismatch = fmt.Sprintf("publication %s does not publish inserts", c.Publication)
	}
	var extra []string
	switch {
	case allTables:
		extra = append(extra, "publishes all tables")
	case tables > 1:
		extra = append(extra, fmt.Sprintf("publishes %d tables", tables))
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
		extra = append(extra, "publishes "+strings.Join(ops, ", "))
	}
	st.extra = strings.Join(extra, "; ")
	return st, nil
}

// ensurePublication checks the publication and creates it when missing
// (unless c.NoCreate).
func ensurePublication(ctx context.Context, conn *pgx.Conn, c *Config) error {
	table, _ := pgname.Parse(c.Table, "public")
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table.Sanitize()).Scan(&exists); err != nil {
		return fmt.Errorf("relay: look up table %s: %w", table, err)
	}
	if !exists {
		return fmt.Errorf("%w: %s (run relay setup)", ErrTableMissing, table)
	}
	for attempt := 0; ; attempt++ {
		st, err := inspectPublication(ctx, conn, c)
		if err != nil {
			return err
		}
		if st.exists {
			if st.mismatch != "" {
				return fmt.Errorf("%w: %s", ErrPublicationMismatch, st.mismatch)
			}
			if st.extra != "" {
				c.Logger.Warn("publication covers more than the outbox inserts; the relay ignores the rest, but the server still decodes and sends it",
					"publication", c.Publication, "extra", st.extra)
			}
			return nil
		}
		if c.NoCreate {
			return fmt.Errorf("%w: %s (run relay setup, or allow creation)", ErrPublicationMissing, c.Publication)
		}
		_, err = conn.Exec(ctx, `CREATE PUBLICATION `+pgx.Identifier{c.Publication}.Sanitize()+
			` FOR TABLE `+table.Sanitize()+` WITH (publish = 'insert')`)
		var pgErr *pgconn.PgError
		if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42710" && attempt == 0) { // created concurrently
			return fmt.Errorf("relay: create publication %s: %w", c.Publication, err)
		}
		if err == nil {
			c.Logger.Info("created publication", "publication", c.Publication, "table", table.String())
			return nil
		}
	}
}

// checkTable validates the outbox table's columns from the catalog.
func checkTable(ctx context.Context, conn *pgx.Conn, c *Config) error {
	table, _ := pgname.Parse(c.Table, "public")
	rows, err := conn.Query(ctx, `SELECT attname, atttypid FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, table.Sanitize())
	if err != nil {
		return fmt.Errorf("relay: read columns of %s: %w", table, err)
	}
	var names []string
	var types []uint32
	for rows.Next() {
		var n string
		var t uint32
		if err := rows.Scan(&n, &t); err != nil {
			return err
		}
		names, types = append(names, n), append(types, t)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("relay: read columns of %s: %w", table, err)
	}
	_, err = checkColumns(table.String(), names, types)
	return err
}
