package pgname

import "testing"

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    Table
		quoted  string
		wantErr bool
	}{
		{in: "outbox", want: Table{"public", "outbox"}, quoted: `"public"."outbox"`},
		{in: " billing.events ", want: Table{"billing", "events"}, quoted: `"billing"."events"`},
		{in: `app.My"Table`, want: Table{"app", `My"Table`}, quoted: `"app"."My""Table"`},
		{in: "", wantErr: true},
		{in: "a.b.c", wantErr: true},
		{in: ".outbox", wantErr: true},
		{in: "public.", wantErr: true},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in, "public")
		if tt.wantErr {
			if err == nil {
				t.Errorf("Parse(%q) = %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want || got.Sanitize() != tt.quoted {
			t.Errorf("Parse(%q) = %v (%s), %v; want %v (%s)", tt.in, got, got.Sanitize(), err, tt.want, tt.quoted)
		}
	}
}
