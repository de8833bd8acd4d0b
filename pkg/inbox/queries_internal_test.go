package inbox

import "testing"

// onTable names the table and the columns a statement picks, and nothing
// else: a placeholder it is not given stays.
func TestOnTable(t *testing.T) {
	for _, tc := range []struct {
		text    string
		columns []string
		want    string
	}{
		{`SELECT 1 FROM {T} WHERE {T}.a = 1`, nil, `SELECT 1 FROM "s"."t" WHERE "s"."t".a = 1`},
		{`DELETE FROM {T} WHERE {AGE} < $1`, []string{"{AGE}", "completed_at"}, `DELETE FROM "s"."t" WHERE completed_at < $1`},
		{`SELECT {AGE}, {OTHER} FROM {T}`, []string{"{AGE}", "updated_at"}, `SELECT updated_at, {OTHER} FROM "s"."t"`},
	} {
		if got := onTable(`"s"."t"`, tc.text, tc.columns...); got != tc.want {
			t.Errorf("onTable(%q, %q) = %q, want %q", tc.text, tc.columns, got, tc.want)
		}
	}
}
