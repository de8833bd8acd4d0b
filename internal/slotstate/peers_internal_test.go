package slotstate

import (
	"reflect"
	"testing"
)

// publicationNames reads what a walsender asked for from its command as
// pg_stat_activity shows it: the relay's quoted form, lists, unquoted
// names folded, and nothing for other commands or a hidden query.
func TestPublicationNames(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{`START_REPLICATION SLOT "s" LOGICAL 0/0 (proto_version '1', publication_names '"pgoutbox"', messages 'true')`, []string{"pgoutbox"}},
		{`START_REPLICATION SLOT s LOGICAL 0/0 (proto_version '1', publication_names 'a, "B,c", D')`, []string{"a", "B,c", "d"}},
		{`START_REPLICATION SLOT s LOGICAL 0/0 (publication_names '"it''s", "q""x"')`, []string{"it's", `q"x`}},
		{`IDENTIFY_SYSTEM`, nil},
		{`<insufficient privilege>`, nil},
	} {
		if got := publicationNames(tc.query); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("publicationNames(%q) = %q, want %q", tc.query, got, tc.want)
		}
	}
}
