package pgname

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Table is a schema-qualified table name.
type Table struct {
	Schema string
	Name   string
}

// Parse splits "schema.table" or "table" (schema defaults to defaultSchema).
// Names are taken literally (case preserved); they are always quoted in SQL.
func Parse(s, defaultSchema string) (Table, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Table{}, fmt.Errorf("table name is empty")
	}
	parts := strings.Split(s, ".")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return Table{Schema: defaultSchema, Name: parts[0]}, nil
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return Table{Schema: parts[0], Name: parts[1]}, nil
	}
	return Table{}, fmt.Errorf("table name %q: want \"table\" or \"schema.table\"", s)
}

// Sanitize returns the quoted, qualified identifier for use in SQL text.
func (t Table) Sanitize() string {
	return pgx.Identifier{t.Schema, t.Name}.Sanitize()
}

// String returns the unquoted "schema.table" form for messages and labels.
func (t Table) String() string { return t.Schema + "." + t.Name }
