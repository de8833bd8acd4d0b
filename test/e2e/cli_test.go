package e2e

import (
	"net"
	"strings"
	"testing"
)

// The built binary maps errors to exit codes and prints one stderr line
// without the password (cmd/relay's wiring around internal/relaycli).
func TestBinaryExitCodes(t *testing.T) {
	t.Parallel()
	bin := buildRelay(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	const secret = "BinSecretPw42"
	url := "postgres://relay:" + secret + "@" + closed + "/app?sslmode=disable"
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"status", "--database-url", url}, 1, "connect"},
		{[]string{"run", "--database-url", url, "--brokers", closed, "--metrics-addr", ""}, 1, "database unreachable"},
		{[]string{"run", "--database-url", url, "--brokers", closed, "--compression", "brotli"}, 2, "--compression"},
		{[]string{"teardown", "--database-url", url}, 2, "--yes"},
		{[]string{"--no-such-flag"}, 2, "no-such-flag"},
	} {
		code, out := runRelay(t, bin, tc.args...)
		// The password on the command line earns a warning log record;
		// the error itself is one line.
		var lines []string
		for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			if !strings.HasPrefix(l, "time=") {
				lines = append(lines, l)
			}
		}
		if code != tc.code || len(lines) != 1 || !strings.HasPrefix(lines[0], "relay: ") || !strings.Contains(lines[0], tc.want) {
			t.Errorf("relay %s: exit %d, output:\n%s\nwant exit %d and one relay: line mentioning %q", strings.Join(tc.args, " "), code, out, tc.code, tc.want)
		}
		if strings.Contains(out, secret) {
			t.Errorf("relay %s: output shows the password", tc.args[0])
		}
	}
	if code, out := runRelay(t, bin, "--help"); code != 0 || !strings.Contains(out, "teardown") {
		t.Errorf("relay --help: exit %d\n%s", code, out)
	}
}
