package redact_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

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
		{"host=h password = 'a b' sslpassword='k\\'ey' dbname=d", "host=h password=xxxxx sslpassword=xxxxx dbname=d"},
		{"password=a\\ b host=h", "password=xxxxx host=h"},
		{"host=h SSLPASSWORD=k", "host=h SSLPASSWORD=xxxxx"},
		// The case: a value holding "://" does not make a URL.
		{"host=db sslrootcert=/etc/ca.pem sslpassword=keypass1 options='-c x=https://y'",
			"host=db sslrootcert=/etc/ca.pem sslpassword=xxxxx options='-c x=https://y'"},
		{"host=db port=5433 dbname='my db' user=app password=pw", "host=db port=5433 dbname='my db' user=app password=xxxxx"},
		{"  host=h\tport = 5432\n", "host=h port=5432"},
		{"host=h application_name='x password=y'", "host=h application_name='x password=y'"},
		{"application_name='it\\'s \\\\ok' host=h", "application_name='it\\'s \\\\ok' host=h"},
		{"host=a\\b", "host=ab"},
		{"host=h password=", "host=h password=xxxxx"},
		{"host=h dbname=''", "host=h dbname=''"},
		{"postgresql://u:pw@h/db", "postgresql://u:xxxxx@h/db"},
		// What libpq refuses is reported, never echoed.
		{"password='unterminated host=h", redact.Unparsable},
		{"host=h password='it''s' port=1", redact.Unparsable}, // libpq: no doubled quotes
		{"host=h password pw", redact.Unparsable},
		{"host=h =pw", redact.Unparsable},
		{"mysql://u:pw@h/db?x=1", redact.Unparsable}, // a name that is not an identifier
		{"POSTGRES://u:pw@h/db", redact.Unparsable},  // pgconn's prefix test is case-sensitive
		{"host=h\x00 password=pw", redact.Unparsable},
		{"just some text", redact.Unparsable},
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
	got = redact.Secrets(`host=h password='it\'s' sslpassword=k2 aws_token='open`)
	want := map[string]bool{`'it\'s'`: true, "it's": true, "k2": true, "'open": true, "open": true}
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

// The password pgconn (the driver that reads these strings) finds in a
// keyword/value string is one Secrets reports and URL hides: the parsers
// agree on where each value begins and ends.
func FuzzSecretsAgreeWithPgconn(f *testing.F) {
	f.Add(`host=db sslrootcert=/etc/ca.pem password=keypass1 options='-c x=https://y'`)
	f.Add(`host=h password = 'a b\' c\\' dbname=d`)
	f.Add(`password=a\ b\'c host=h`)
	f.Add(`host='x' password='' user=u`)
	// Only the string may supply a password.
	f.Setenv("PGPASSWORD", "")
	f.Setenv("PGPASSFILE", "/nonexistent")
	f.Setenv("PGSERVICEFILE", "/nonexistent")
	f.Fuzz(func(t *testing.T, s string) {
		if isURLForm(s) {
			t.Skip()
		}
		cfg, err := pgconn.ParseConfig(s)
		if err != nil || cfg.Password == "" {
			t.Skip()
		}
		found := false
		for _, v := range redact.Secrets(s) {
			found = found || v == cfg.Password
		}
		if !found {
			t.Fatalf("Secrets(%q) = %q lacks pgconn's password %q", s, redact.Secrets(s), cfg.Password)
		}
		if out := redact.URL(s); out != redact.Unparsable {
			params := strings.Fields(out)
			for _, p := range params {
				if strings.HasPrefix(p, "password=") && p != "password="+redact.Placeholder {
					t.Fatalf("URL(%q) = %q shows the password", s, out)
				}
			}
		}
	})
}

func isURLForm(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// A connection string that does not parse is never echoed, nor any part
// of it: pgconn's own error quoted "ret1", the end of a password with a
// space whose quote was never closed.
func TestParseErrorEchoesNothing(t *testing.T) {
	for _, conn := range []string{
		"host=db user=u password='Sec ret1 dbname=x",
		"host=db user=u password=Sec ret1 dbname=x",
		"host=db user=u password='Sec\\' ret1' dbname=x port=xyzret1",
		"postgres://u:Sec ret1@db:5432/x",
		"postgres://u:Secret1@db:5432/x%zz",
		"postgres://u:Secret1@db:port/x",
		"postgresql://u:Secret1@[db/x",
	} {
		_, err := pgconn.ParseConfig(conn)
		if err == nil {
			t.Fatalf("%q parsed", conn)
		}
		got := redact.ParseError(conn, err)
		for _, secret := range []string{"Sec", "ret1", "Secret1"} {
			if strings.Contains(got.Error(), secret) {
				t.Errorf("%q: error %q holds %q", conn, got, secret)
			}
		}
		if !errors.Is(got, redact.ErrUnparsable) {
			t.Errorf("%q: %v does not wrap redact.ErrUnparsable", conn, got)
		}
	}
	got := redact.ParseError("host=db password='a", errors.New(`unterminated quoted string in connection info string`)).Error()
	if !strings.Contains(got, "keyword/value") || !strings.Contains(got, "unterminated quoted string") {
		t.Errorf("the reason is lost: %q", got)
	}
}

// The base64 of a Basic credential is scrubbed wherever it appears: a
// Pushgateway or a proxy may echo the Authorization header in an error.
func TestBasicCredentials(t *testing.T) {
	const b64 = "cHVzaGVyOlB1c2hQdzEyMw==" // pusher:PushPw123
	for _, in := range []string{
		"Authorization: Basic " + b64,
		"authorization: basic " + b64 + " and more",
		`{"header":"Basic ` + b64 + `"}`,
		"Basic%20" + b64,
	} {
		if got := redact.BasicCredentials(in); strings.Contains(got, b64) || strings.Contains(got, "cHVz") || !strings.Contains(got, redact.Placeholder) {
			t.Errorf("%q: %q", in, got)
		}
	}
	if in := "a basic check passed"; redact.BasicCredentials(in) != in {
		t.Errorf("%q changed to %q", in, redact.BasicCredentials(in))
	}
}
