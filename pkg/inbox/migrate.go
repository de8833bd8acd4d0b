package inbox

import (
	"cmp"
	"context"
	"strings"

	"github.com/pgoutbox/pgoutbox/internal/migrate"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
)

// Migrate creates or upgrades the inbox table (table, "table" or
// "schema.table"; empty means public.inbox) by applying the migrations in
// sql/inbox. It is idempotent and safe to call concurrently; db is a
// *pgx.Conn or *pgxpool.Pool. It returns the versions it applied.
func Migrate(ctx context.Context, db Beginner, table string) ([]int, error) {
	return migrate.Table(ctx, db, "inbox", cmp.Or(table, DefaultTable), func(t pgname.Table) *strings.Replacer {
		ident := func(suffix string) string {
			return `"` + strings.ReplaceAll(t.Name+suffix, `"`, `""`) + `"`
		}
		// The table's name also appears as a string literal ('public.inbox'):
		// that occurrence becomes a literal with its quotes doubled. The
		// replacer tries it first, since it starts one character earlier.
		literal := "'" + strings.ReplaceAll(t.Sanitize(), "'", "''") + "'"
		pairs := []string{"'public.inbox'", literal, "public.inbox", t.Sanitize()}
		for _, s := range []string{"_pkey", "_business_key_key", "_status_check", "_attempts_check",
			"_completed_at_idx", "_processing_locked_until_idx", "_unfinished_idx"} {
			pairs = append(pairs, "inbox"+s, ident(s))
		}
		return strings.NewReplacer(pairs...)
	})
}
