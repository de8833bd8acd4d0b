package pgoutbox

import (
	"embed"
	"io/fs"
)

//go:embed sql/*/*.sql
var sqlFiles embed.FS

// Migrations holds the migration files of the sql/ folder, one folder per
// component, named NNN_description.up.sql and applied in numeric order
// (for example "outbox/001_create_outbox.up.sql"). Every statement is
// idempotent (IF NOT EXISTS, CREATE OR REPLACE), so a file applied by hand
// and later again by the Go API does no harm. The files name the default
// tables (public.outbox, public.inbox); the Go API substitutes the
// configured ones. The numbering may have gaps.
var Migrations fs.FS = mustSub(sqlFiles, "sql")

func mustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err) // dir is a constant that names a folder of fsys
	}
	return sub
}
