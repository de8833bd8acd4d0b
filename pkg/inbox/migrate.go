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
// sql/inbox, on driver's database (the driver an Inbox takes, on pgx or
// database/sql):
//
//	applied, err := inbox.Migrate(ctx, inbox.Pgx(pool), "")
//
// It is idempotent and safe to call concurrently. It returns the versions
// it applied. It has the shape of outbox.Migrate.
func Migrate[TTx any](ctx context.Context, driver *Driver[TTx], table string) ([]int, error) {
	if err := driver.check(); err != nil {
		return nil, err
	}
	return migrate.Table(ctx, driver.h.DB, "inbox", cmp.Or(table, DefaultTable), func(t pgname.Table) *strings.Replacer {
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
