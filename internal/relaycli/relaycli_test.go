package relaycli_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/relaycli"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type result struct {
	code           int
	stdout, stderr string
}

// cli runs the relay CLI in-process with args.
func cli(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr testenv.SyncBuffer
	code := relaycli.Run(ctx, args, &stdout, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// running is the relay CLI run in-process in the background by start.
type running struct {
	args   []string
	base   string // its metrics server's URL
	stderr *testenv.SyncBuffer
	cancel context.CancelFunc
	done   chan struct{}
	code   int
}

// start runs the relay CLI with args (which serve metrics on a free port,
// --metrics-addr 127.0.0.1:0, and log JSON) in the background until stop
// or the end of the test, and returns it once it serves metrics.
func start(t *testing.T, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{args: args, stderr: &testenv.SyncBuffer{}, cancel: cancel, done: make(chan struct{}), code: -1}
	var stdout testenv.SyncBuffer
	go func() {
		defer close(r.done)
		r.code = relaycli.Run(ctx, args, &stdout, r.stderr)
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	r.base = "http://" + metricsAddr(t, r.stderr, r.done)
	return r
}

// stop cancels r (what SIGTERM does in cmd/relay) and fails the test
// unless it returns exit code 0 within a minute.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		t.Fatalf("relay %s did not return within a minute of cancellation", r.args[0])
	}
	if r.code != 0 {
		t.Fatalf("relay %s exited %d after cancellation, want 0\n%s", r.args[0], r.code, r.stderr.String())
	}
}

// fixture is a database with unique slot and publication names (slot names
// are cluster-wide).
type fixture struct {
	db   *testenv.DB
	slot string
	args []string // --database-url, --slot, --publication
}

func setup(t *testing.T) *fixture {
	t.Helper()
	db := testenv.NewDB(t)
	slot := db.Name // pgoutbox_test_<pid>_<n>: a valid slot name
	return &fixture{db: db, slot: slot, args: []string{
		"--database-url", db.URL, "--slot", slot, "--publication", "pub_" + slot,
	}}
}

// setupDone is setup after `relay setup` succeeded: the outbox table, the
// publication and the slot exist.
func setupDone(t *testing.T) *fixture {
	t.Helper()
	f := setup(t)
	wantCode(t, f.cli(t, "setup"), 0)
	return f
}

// setupKafka is setupDone and a broker (kfake).
func setupKafka(t *testing.T) (*fixture, *testenv.Kafka) {
	t.Helper()
	return setupDone(t), testenv.NewKafka(t)
}

// exec runs sql on the fixture's database; an error fails the test.
func (f *fixture) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := f.db.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) cli(t *testing.T, command string, extra ...string) result {
	t.Helper()
	return cli(t, append(append([]string{command}, f.args...), extra...)...)
}

type slotRow struct {
	exists             bool
	confirmed, restart string
	walStatus          string
	active             bool
	publicationExists  bool
}

// slotRow reads the slot straight from pg_replication_slots.
func (f *fixture) slotRow(t *testing.T) slotRow {
	t.Helper()
	var r slotRow
	ctx := context.Background()
	err := f.db.Pool.QueryRow(ctx, `SELECT count(*) > 0,
		coalesce(max(confirmed_flush_lsn::text), ''), coalesce(max(restart_lsn::text), ''),
		coalesce(max(wal_status), ''), coalesce(bool_or(active), false),
		EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $2)
		FROM pg_replication_slots WHERE slot_name = $1`, f.slot, "pub_"+f.slot).
		Scan(&r.exists, &r.confirmed, &r.restart, &r.walStatus, &r.active, &r.publicationExists)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// wantOneErrorLine checks stderr is exactly one "relay: ..." line holding
// every part.
func wantOneErrorLine(t *testing.T, stderr string, parts ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "relay: ") {
		t.Fatalf("stderr is not one relay: line:\n%s", stderr)
	}
	for _, p := range parts {
		if !strings.Contains(lines[0], p) {
			t.Fatalf("stderr %q does not mention %q", lines[0], p)
		}
	}
}

func TestSetupIsIdempotent(t *testing.T) {
	t.Parallel()
	f := setup(t)

	r := f.cli(t, "setup")
	wantCode(t, r, 0)
	for _, want := range []string{
		"table public.outbox: created",
		"publication pub_" + f.slot + ": created",
		"slot " + f.slot + ": created",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("first setup output lacks %q:\n%s", want, r.stdout)
		}
	}
	row := f.slotRow(t)
	if !row.exists || !row.publicationExists {
		t.Fatalf("after setup: slot exists %v, publication exists %v", row.exists, row.publicationExists)
	}

	r = f.cli(t, "setup")
	wantCode(t, r, 0)
	for _, want := range []string{
		"table public.outbox: exists",
		"publication pub_" + f.slot + ": exists",
		"slot " + f.slot + ": exists (confirmed_flush_lsn " + row.confirmed + ")",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("second setup output lacks %q:\n%s", want, r.stdout)
		}
	}
	if again := f.slotRow(t); again.confirmed != row.confirmed {
		t.Errorf("second setup moved the slot: confirmed %s, was %s", again.confirmed, row.confirmed)
	}
}

func TestTeardownNeedsYes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	wantCode(t, f.cli(t, "setup"), 0)

	r := f.cli(t, "teardown")
	wantCode(t, r, 2)
	wantOneErrorLine(t, r.stderr, "--yes", f.slot)
	if row := f.slotRow(t); !row.exists || !row.publicationExists {
		t.Fatalf("teardown without --yes dropped something: %+v", row)
	}

	r = f.cli(t, "teardown", "--yes")
	wantCode(t, r, 0)
	for _, want := range []string{"slot " + f.slot + ": dropped", "publication pub_" + f.slot + ": dropped", "table public.outbox: kept"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("teardown output lacks %q:\n%s", want, r.stdout)
		}
	}
	if row := f.slotRow(t); row.exists || row.publicationExists {
		t.Fatalf("after teardown: %+v", row)
	}
	wantCode(t, f.cli(t, "status"), 1)
}

func TestBadUsageExitsTwoNamingTheFlag(t *testing.T) {
	t.Parallel()
	url := "postgres://relay:Sup3rSecretPw@127.0.0.1:1/db?sslmode=disable"
	base := []string{"run", "--database-url", url, "--brokers", "127.0.0.1:9092"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"on-invalid", append(base, "--on-invalid", "maybe"), "--on-invalid"},
		// The policy value is dead-letter, as the inbox's --conflict-policy
		// spells it; no release accepted "dlq".
		{"on-invalid dlq", append(base, "--on-invalid", "dlq"), `--on-invalid: "dlq" is not one of dead-letter, stop`},
		{"on-unavailable-topic dlq", append(base, "--on-unavailable-topic", "dlq"), `--on-unavailable-topic: "dlq" is not one of dead-letter, stop`},
		{"on-gap fail", append(base, "--on-gap", "fail"), `--on-gap: "fail" is not one of stop, backfill`},
		{"compression", append(base, "--compression", "brotli"), `--compression: "brotli" is not one of none, gzip, snappy, lz4, zstd`},
		{"table-format", append(base, "--table-format", "maxwell"), `--table-format: "maxwell" is not one of pgoutbox, debezium`},
		{"batch-size", append(base, "--batch-size", "0"), "--batch-size"},
		{"max-message-bytes", append(base, "--max-message-bytes", "-1"), "--max-message-bytes"},
		{"buffer-bytes", append(base, "--buffer-bytes", "0"), "--buffer-bytes"},
		{"batch-timeout syntax", append(base, "--batch-timeout", "soon"), "batch-timeout"},
		{"batch-timeout unit", append(base, "--batch-timeout", "5"), `--batch-timeout "5": want a duration with a unit, such as 250ms, 5s`},
		{"buffer-bytes unit", append(base, "--buffer-bytes", "64 parsecs"), `--buffer-bytes "64 parsecs": want a size in bytes, such as 1048576, 64MiB or 64MB`},
		{"write-timeout zero", append(base, "--write-timeout", "0s"), "--write-timeout"},
		{"prune-after negative", append(base, "--prune-after", "-1h"), "--prune-after"},
		{"broker without port", []string{"run", "--database-url", url, "--brokers", "kafka"}, "--brokers"},
		{"brokers missing", []string{"run", "--database-url", url}, "--brokers"},
		{"database-url missing", []string{"status"}, "--database-url"},
		{"database-url syntax", []string{"status", "--database-url", "postgres://relay:Sup3rSecretPw@[::1"}, "--database-url"},
		// An unterminated quote: pgconn quoted the rest of the string, and
		// its reason named the word after the space ("Pw" here).
		{"database-url keyword syntax", []string{"status", "--database-url", "host=db user=relay password='Sup3rSecret Sup3rSecretPw dbname=x"}, "unterminated quoted string"},
		{"database-url keyword word", []string{"status", "--database-url", "host=db user=relay password=Sup3rSecret Sup3rSecretPw dbname=x"}, `missing "=" after "…"`},
		{"slot", []string{"status", "--database-url", url, "--slot", "Bad-Slot"}, "--slot"},
		{"log-format", append(base, "--log-format", "xml"), "--log-format"},
		{"log-level", append(base, "--log-level", "loud"), "--log-level"},
		{"sasl mechanism", append(base, "--kafka-sasl-mechanism", "gssapi", "--kafka-sasl-username", "u"), "--kafka-sasl-mechanism"},
		{"sasl user missing", append(base, "--kafka-sasl-mechanism", "plain"), "--kafka-sasl-username"},
		{"tls cert without key", append(base, "--kafka-tls-cert-file", "/nonexistent.pem"), "--kafka-tls-key-file"},
		{"tls ca file", append(base, "--kafka-tls-ca-file", "/nonexistent/ca.pem"), "--kafka-tls-ca-file"},
		{"metrics-addr", append(base, "--metrics-addr", "9740"), "--metrics-addr"},
		{"sasl plain without tls", append(base, "--kafka-sasl-mechanism", "plain", "--kafka-sasl-username", "u"), "--kafka-allow-insecure-sasl"},
		{"sasl scram without tls", append(base, "--kafka-sasl-mechanism", "scram-sha-512", "--kafka-sasl-username", "u"), "plaintext"},
		{"require-tls", []string{"status", "--database-url", "postgres://relay@db.example.com/db?sslmode=require", "--require-tls"}, "verify-full"},
		{"unknown sink", append(base, "--sink", "pigeon"), `--sink: "pigeon" is not one of kafka, nats, rabbitmq`},
		{"sink without url", []string{"run", "--database-url", url, "--sink", "rabbitmq"}, "--sink rabbitmq needs --sink-url (or RELAY_SINK_URL)"},
		{"sink url for kafka", append(base, "--sink-url", "rabbitmq-stream://u:Sup3rSecretPw@h:5552/"), "--sink-url is for --sink nats or rabbitmq"},
		{"unknown flag", append(base, "--bogus"), "bogus"},
		{"unknown command", []string{"start"}, `unknown command "start" (commands: run, setup, status, teardown, recover, backfill, verify, dev; see relay --help)`},
		{"help unknown command", []string{"help", "start"}, `unknown command "start"`},
		{"stray argument", []string{"status", "--database-url", url, "extra"}, `unexpected argument "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := cli(t, tc.args...)
			wantCode(t, r, 2)
			wantOneErrorLine(t, r.stderr, tc.want)
			if strings.Contains(r.stderr+r.stdout, "Sup3rSecretPw") {
				t.Fatalf("output shows the database password:\n%s%s", r.stdout, r.stderr)
			}
		})
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// withoutLogLines drops the log records (text format) from stderr.
func withoutLogLines(stderr string) string {
	var keep []string
	for _, l := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(l, "time=") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func TestUnreachableDatabaseExitsOne(t *testing.T) {
	t.Parallel()
	const secret = "Hunter2-Secret-Pw"
	url := "postgres://relay:" + secret + "@" + closedAddr(t) + "/app?sslmode=disable"
	kafka := testenv.NewKafka(t)
	for _, args := range [][]string{
		{"status", "--database-url", url},
		{"setup", "--database-url", url},
		{"teardown", "--yes", "--database-url", url},
		{"run", "--database-url", url, "--brokers", kafka.Brokers[0], "--metrics-addr", ""},
		{"run", "--database-url", "host=127.0.0.1 port=" + strings.Split(closedAddr(t), ":")[1] + " user=relay password=" + secret,
			"--brokers", kafka.Brokers[0], "--metrics-addr", ""},
	} {
		r := cli(t, args...)
		wantCode(t, r, 1)
		// The URL on the command line earns a warning log line (checked
		// for the secret below); the error is one line.
		if !strings.Contains(r.stderr, "credentials given on the command line") {
			t.Errorf("%s: no warning about the password on the command line:\n%s", args[0], r.stderr)
		}
		wantOneErrorLine(t, withoutLogLines(r.stderr), "connect")
		if strings.Contains(r.stdout+r.stderr, secret) {
			t.Fatalf("%s: output shows the database password:\n%s%s", args[0], r.stdout, r.stderr)
		}
	}
}

func TestUnreachableBrokerExitsOne(t *testing.T) {
	t.Parallel()
	f := setup(t)
	broker := closedAddr(t)
	r := f.cli(t, "run", "--brokers", broker, "--metrics-addr", "")
	wantCode(t, r, 1)
	wantOneErrorLine(t, r.stderr, "kafka unreachable", broker)
}

// Not parallel: it sets environment variables.
func TestHelpAndEnvironment(t *testing.T) {
	const secret = "EnvSecretPw123"
	t.Setenv("RELAY_DATABASE_URL", "postgres://relay:"+secret+"@127.0.0.1:1/app")
	t.Setenv("RELAY_ON_INVALID", "sometimes")

	top := cli(t, "--help")
	wantCode(t, top, 0)
	for _, cmd := range []string{"run", "setup", "status", "teardown"} {
		if !strings.Contains(top.stdout, "\n   "+cmd+" ") {
			t.Errorf("relay --help does not list %s:\n%s", cmd, top.stdout)
		}
	}

	help := cli(t, "run", "--help")
	wantCode(t, help, 0)
	flags := []string{
		"database-url", "brokers", "table", "slot", "publication", "no-create", "topic-template", "dlq-topic",
		"on-invalid", "max-message-bytes", "batch-size", "buffer-bytes", "batch-timeout", "compression", "write-timeout",
		"status-interval", "shutdown-timeout", "prune-after", "prune-interval", "prune-batch-size", "metrics-addr",
		"log-level", "log-format", "kafka-tls", "kafka-tls-ca-file", "kafka-tls-cert-file", "kafka-tls-key-file",
		"kafka-tls-insecure-skip-verify", "kafka-sasl-mechanism", "kafka-sasl-username", "kafka-sasl-password", "kafka-sasl-token-file",
		"kafka-allow-insecure-sasl", "require-tls", "lag-poll-interval", "standby-retry-interval", "heartbeat-interval", "topic-unavailable-grace",
		"instance-id", "allowed-topics", "on-unavailable-topic", "no-auto-create-topics",
		"exactly-once", "progress-topic", "transaction-timeout", "fence-writes",
	}
	for _, f := range flags {
		env := "$RELAY_" + strings.ToUpper(strings.ReplaceAll(f, "-", "_")) + "]"
		if !strings.Contains(help.stdout, "--"+f+" ") || !strings.Contains(help.stdout, env) {
			t.Errorf("relay run --help lacks --%s or %s", f, env)
		}
	}
	for _, want := range []string{"at-least-once", "acknowledged", "SIGTERM", "(default: \":9740\")"} {
		if !strings.Contains(help.stdout, want) {
			t.Errorf("relay run --help does not mention %q", want)
		}
	}
	for _, cmd := range []string{"setup", "status", "teardown"} {
		h := cli(t, cmd, "--help")
		wantCode(t, h, 0)
		if !strings.Contains(h.stdout, "$RELAY_DATABASE_URL]") || !strings.Contains(h.stdout, "$RELAY_SLOT]") {
			t.Errorf("relay %s --help lacks the database env vars:\n%s", cmd, h.stdout)
		}
		if strings.Contains(h.stdout, secret) {
			t.Errorf("relay %s --help shows the password from RELAY_DATABASE_URL", cmd)
		}
	}
	if strings.Contains(help.stdout+top.stdout, secret) {
		t.Error("--help shows the password from RELAY_DATABASE_URL")
	}

	// Environment values are validated like flags and named by flag.
	r := cli(t, "run", "--brokers", "127.0.0.1:9092")
	wantCode(t, r, 2)
	wantOneErrorLine(t, r.stderr, "--on-invalid", "sometimes")
	if strings.Contains(r.stderr, secret) {
		t.Error("error shows the password from RELAY_DATABASE_URL")
	}
}

// Flags go before or after the command, sizes take units, `help CMD` is
// `CMD --help`, and --version answers from the build information.
func TestCommandLineConvention(t *testing.T) {
	t.Parallel()
	f := setup(t)
	wantCode(t, cli(t, append(append([]string{}, f.args...), "setup")...), 0)
	before := cli(t, append(append([]string{}, f.args...), "status", "--json")...)
	after := f.cli(t, "status", "--json")
	wantCode(t, before, 1) // no relay streams the slot
	if before.stdout == "" || before.stdout[:40] != after.stdout[:40] {
		t.Errorf("status with flags before the command:\n%s\nafter:\n%s", before.stdout, after.stdout)
	}
	help, viaHelp := cli(t, "run", "--help"), cli(t, "help", "run")
	wantCode(t, viaHelp, 0)
	if help.stdout != viaHelp.stdout {
		t.Errorf("relay help run differs from relay run --help")
	}
	if !strings.Contains(help.stdout, `(default: 16MiB)`) || !strings.Contains(help.stdout, `--max-message-bytes value`) {
		t.Errorf("relay run --help does not show sizes with units:\n%s", help.stdout)
	}
	v := cli(t, "--version")
	wantCode(t, v, 0)
	if !strings.HasPrefix(v.stdout, "relay ") || !strings.Contains(v.stdout, "go1.") {
		t.Errorf("relay --version: %q", v.stdout)
	}
	// Sizes with units reach the engine: 1KiB is below the 1MiB default
	// --max-message-bytes, which the relay warns about.
	r := f.cli(t, "run", "--brokers", closedAddr(t), "--buffer-bytes", "1KiB", "--metrics-addr", "", "--log-format", "json")
	wantCode(t, r, 1)
	if !strings.Contains(r.stderr, `"buffer_bytes":1024`) {
		t.Errorf("--buffer-bytes 1KiB did not reach the relay as 1024 bytes:\n%s", r.stderr)
	}
}

// On a server without logical decoding, setup and run fail before creating
// anything, with one line naming the setting and its fix.
func TestPrerequisitesFailWithTheFix(t *testing.T) {
	t.Parallel()
	srv := testenv.NewServer(t, "wal_level=replica")
	for _, args := range [][]string{
		{"setup", "--database-url", srv.AdminURL},
		{"run", "--database-url", srv.AdminURL, "--brokers", closedAddr(t), "--metrics-addr", ""},
	} {
		r := cli(t, args...)
		wantCode(t, r, 1)
		wantOneErrorLine(t, r.stderr, "prerequisites not met", "wal_level is replica", "ALTER SYSTEM SET wal_level = logical")
	}
	r := cli(t, "status", "--database-url", srv.AdminURL)
	wantCode(t, r, 1)
	wantOneErrorLine(t, r.stderr, `slot "pgoutbox" does not exist`, "relay setup cannot create them", "wal_level is replica")
}

// setup --wait retries an unreachable database, says so once, then fails
// with the connection error.
func TestSetupWaitsForTheDatabase(t *testing.T) {
	t.Parallel()
	url := "postgres://relay:WaitSecretPw@" + closedAddr(t) + "/app?sslmode=disable"
	r := cli(t, "setup", "--wait", "1500ms", "--database-url", url)
	wantCode(t, r, 1)
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(r.stderr, "\n"), "\n") {
		if strings.HasPrefix(l, "relay: ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "relay: waiting up to 1.5s for the database: ") ||
		!strings.Contains(lines[1], "connection refused") || strings.Contains(r.stderr, "WaitSecretPw") {
		t.Fatalf("stderr:\n%s", r.stderr)
	}
}

// Not parallel: it sets environment variables. A database URL with a
// password given as a flag earns one warning naming the flag and the
// variables to use instead; the same URL from RELAY_DATABASE_URL_FILE, or a
// URL without a password, earns none.
func TestSecretFlagWarning(t *testing.T) {
	const secret = "WarnSecretPw42"
	closed := closedAddr(t)
	withPw := "postgres://relay:" + secret + "@" + closed + "/app?sslmode=disable&connect_timeout=5"
	file := filepath.Join(t.TempDir(), "url")
	if err := os.WriteFile(file, []byte(withPw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	warnings := func(r result) int { return strings.Count(r.stderr, "credentials given on the command line") }

	r := cli(t, "status", "--database-url", withPw)
	wantCode(t, r, 1)
	if warnings(r) != 1 || !strings.Contains(r.stderr, "flag=--database-url") ||
		!strings.Contains(r.stderr, "RELAY_DATABASE_URL or RELAY_DATABASE_URL_FILE") || strings.Contains(r.stderr, secret) {
		t.Errorf("password in --database-url: want one warning naming the flag, without the password:\n%s", r.stderr)
	}
	r = cli(t, "status", "--database-url", "postgres://relay@"+closed+"/app?sslmode=disable&connect_timeout=5")
	wantCode(t, r, 1)
	if warnings(r) != 0 {
		t.Errorf("no password in --database-url: want no warning:\n%s", r.stderr)
	}
	t.Setenv("RELAY_DATABASE_URL_FILE", file)
	r = cli(t, "status")
	wantCode(t, r, 1)
	if warnings(r) != 0 || strings.Contains(r.stderr, secret) {
		t.Errorf("URL from RELAY_DATABASE_URL_FILE: want no warning, no password:\n%s", r.stderr)
	}
}
