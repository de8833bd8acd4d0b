package redact_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/redact"
)

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:pw@h:5432/db", "postgres://u:xxxxx@h:5432/db"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"postgres://h/db?sslmode=verify-full", "postgres://h/db?sslmode=verify-full"},
		{"postgres://u:pw@h/db?sslmode=verify-full&sslpassword=KEYPASS", "postgres://u:xxxxx@h/db?sslmode=verify-full&sslpassword=xxxxx"},
		{"postgres://h/db?password=pw&application_name=a", "postgres://h/db?application_name=a&password=xxxxx"},
		{"postgres://h/db?PassWord=pw", "postgres://h/db?PassWord=xxxxx"},
		{"postgres://h/db?aws_token=T&client_secret=S", "postgres://h/db?aws_token=xxxxx&client_secret=xxxxx"},
		{"postgres://u:p%40ss@h1:5432,h2:5433/db?target_session_attrs=read-write", "postgres://u:xxxxx@h1:5432,h2:5433/db?target_session_attrs=read-write"},
		{"postgres://h/db?password=%zz", redact.Unparsable},
		{"host=h user=u password=pw dbname=d", "host=h user=u password=xxxxx dbname=d"},
		{"host=h password = 'a b' sslpassword='k\\'ey' dbname=d", "host=h password = xxxxx sslpassword=xxxxx dbname=d"},
		{"host=h password='it''s' port=1", "host=h password=xxxxx port=1"},
		{"password=a\\ b host=h", "password=xxxxx host=h"},
		{"password='unterminated host=h", "password=xxxxx"},
		{"host=h application_name='x password=y'", "host=h application_name='x password=y'"},
		{"host=h SSLPASSWORD=k", "host=h SSLPASSWORD=xxxxx"},
		{"", ""},
	} {
		if got := redact.URL(tc.in); got != tc.want {
			t.Errorf("URL(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestSecrets(t *testing.T) {
	got := redact.Secrets("postgres://u:pw@h/db?sslpassword=KEY&sslmode=require")
	if strings.Join(got, ",") != "pw,KEY" {
		t.Errorf("Secrets(URL) = %q, want [pw KEY]", got)
	}
	got = redact.Secrets("host=h password='it''s' sslpassword=k2")
	want := map[string]bool{"'it''s'": true, "it's": true, "k2": true}
	for _, s := range got {
		if !want[s] {
			t.Errorf("Secrets(keywords) returned %q", s)
		}
		delete(want, s)
	}
	if len(want) != 0 {
		t.Errorf("Secrets(keywords) missed %v", want)
	}
}

// No connection string holding a known secret, in either form and under
// any secret parameter name, ever comes back with that secret.
func FuzzURLNeverReturnsSecret(f *testing.F) {
	f.Add("s3cretPW", "h", "db", uint8(0))
	f.Add("KEYPASS", "db.example.com", "app", uint8(3))
	f.Add("a'b c\\d", "h", "db", uint8(6))
	f.Fuzz(func(t *testing.T, secret, host, db string, form uint8) {
		// The secret must be recognisable: long enough and not part of
		// the rest of the string by chance.
		if len(secret) < 6 || strings.Contains(secret, redact.Placeholder) {
			t.Skip()
		}
		names := []string{"password", "sslpassword", "aws_token", "client_secret"}
		name := names[int(form)%len(names)]
		build := func(secret string) string {
			switch form / 4 % 3 {
			case 0: // URL userinfo and query
				return "postgres://u:" + url.PathEscape(secret) + "@" + url.PathEscape(host) + "/" + url.PathEscape(db) + "?" + name + "=" + url.QueryEscape(secret)
			case 1: // URL query only
				return "postgres://" + url.PathEscape(host) + "/" + url.PathEscape(db) + "?sslmode=require&" + name + "=" + url.QueryEscape(secret)
			default: // keyword/value, quoted as libpq quotes
				q := "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(secret) + "'"
				return "host='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(host) + "' " + name + "=" + q + " dbname=x"
			}
		}
		forms := []string{secret, url.QueryEscape(secret), url.PathEscape(secret)}
		rest := build("")
		for _, f := range forms {
			if strings.Contains(rest, f) {
				t.Skip() // the secret is part of the rest by chance
			}
		}
		in := build(secret)
		out := redact.URL(in)
		for _, f := range forms {
			if strings.Contains(out, f) {
				t.Fatalf("URL(%q) = %q still holds the secret", in, out)
			}
		}
	})
}
