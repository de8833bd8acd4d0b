package sql

import "embed"

// FS holds every migration file, one folder per component (for example
// "outbox/001_create_outbox.up.sql").
//
//go:embed */*.sql
var FS embed.FS
