package relaycli

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// writeFleet writes a fleet file into a temporary directory.
func writeFleet(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadFleet(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "url")
	if err := os.WriteFile(secret, []byte("postgres://u:FleetPw1@db-b:5432/b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeFleet(t, `
defaults:
  brokers: [k1:9092, k2:9092]
  batch-timeout: 5ms
  exactly-once: true
sources:
  - name: orders
    database-url: postgres://u@db-a:5432/a
    slot: orders
  - name: billing
    database-url-file: `+secret+`
    slot: billing
    table: billing.outbox
    exactly-once: false
    allowed-topics: [billing., audit.]
`)
	sc := &scrubber{}
	fc, err := loadFleet(path, sc)
	if err != nil {
		t.Fatal(err)
	}
	sources := fc.Sources
	if len(sources) != 2 || sources[0].Name != "orders" || sources[1].Name != "billing" {
		t.Fatalf("sources %+v", sources)
	}
	a, b := sources[0].Config, sources[1].Config
	if strings.Join(a.Kafka.Brokers, ",") != "k1:9092,k2:9092" || a.BatchTimeout != 5*time.Millisecond || !a.ExactlyOnce || a.Slot != "orders" {
		t.Errorf("orders: defaults not applied: %+v", a)
	}
	if b.ExactlyOnce || b.Table != "billing.outbox" || b.DatabaseURL != "postgres://u:FleetPw1@db-b:5432/b" || strings.Join(b.AllowedTopics, ",") != "billing.,audit." {
		t.Errorf("billing: own settings not applied: %+v", b)
	}
	if !strings.Contains(sc.String("password FleetPw1"), "xxxxx") {
		t.Error("the scrubber did not learn the password read from database-url-file")
	}
	again, err := loadFleet(path, &scrubber{})
	if err != nil || again.Sources[0].settings != sources[0].settings {
		t.Errorf("the same file read twice has other settings: %v", err)
	}
}

func TestLoadFleetErrorsNameSourceAndKey(t *testing.T) {
	const ok = "    database-url: postgres://u@db:5432/a\n    brokers: [k:9092]\n"
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"typo", "sources:\n  - name: a\n" + ok + "    tabel: x\n", []string{"sources[0] (a)", "tabel", "did you mean table"}},
		{"process key", "sources:\n  - name: a\n" + ok + "    metrics-addr: :1\n", []string{"sources[0] (a)", "metrics-addr", "setting of the process", "RELAY_METRICS_ADDR"}},
		{"instance id", "sources:\n  - name: a\n" + ok + "    instance-id: x\n", []string{"instance-id", "setting of the process", "RELAY_INSTANCE_ID"}},
		{"dashes", "sources:\n  - name: a\n" + ok + "    --slot: x\n", []string{"--slot", "without the dashes"}},
		{"default typo", "defaults:\n  brokerz: [k:9092]\nsources:\n  - name: a\n" + ok, []string{"defaults", "brokerz", "did you mean brokers"}},
		{"no name", "sources:\n  - " + ok[4:], []string{"sources[0]", "name: required"}},
		{"bad name", "sources:\n  - name: Orders\n" + ok, []string{"sources[0]", `"Orders"`}},
		{"same name", "sources:\n  - name: a\n" + ok + "    slot: s1\n  - name: a\n" + ok + "    slot: s2\n", []string{"sources[1] (a)", "also the name of sources[0]"}},
		{"same slot", "sources:\n  - name: a\n" + ok + "  - name: b\n" + ok, []string{"sources[1] (b)", "also the slot of source a"}},
		// Slot names are per server: two databases of one server cannot
		// share one.
		{"same slot on one server", "sources:\n  - name: a\n" + ok + "  - name: b\n    database-url: postgres://u@db:5432/b\n    brokers: [k:9092]\n",
			[]string{"sources[1] (b)", "also the slot of source a on the same server", "per server"}},
		{"bad value", "sources:\n  - name: a\n" + ok + "    slot: Bad\n", []string{"sources[0] (a)", "--slot", "lower case"}},
		{"bad duration", "sources:\n  - name: a\n" + ok + "    batch-timeout: soon\n", []string{"sources[0] (a)", "batch-timeout"}},
		{"no brokers", "sources:\n  - name: a\n    database-url: postgres://u@db:5432/a\n", []string{"sources[0] (a)", "brokers"}},
		{"no sources", "defaults:\n  slot: x\n", []string{"no sources"}},
		{"top-level typo", "source:\n  - name: a\n", []string{"line 1: source: not a key of the file (did you mean sources?", "defaults:, sources: and spread:"}},
		{"default for defaults", "default:\n  brokers: [k:9092]\nsources:\n  - name: a\n" + ok, []string{"line 1: default: not a key of the file (did you mean defaults?"}},
		{"spread without group", "spread:\n  session-timeout: 5s\nsources:\n  - name: a\n" + ok, []string{"spread", "group: required"}},
		{"spread bad timeout", "spread:\n  group: g\n  session-timeout: 1s\nsources:\n  - name: a\n" + ok, []string{"spread", "session-timeout", "at least 6s"}},
		{"missing secret file", "sources:\n  - name: a\n    database-url-file: /nonexistent/url\n    brokers: [k:9092]\n", []string{"sources[0] (a)", "database-url-file", "/nonexistent/url"}},
		{"secret twice", "sources:\n  - name: a\n" + ok + "    database-url-file: /etc/hostname\n", []string{"database-url or database-url-file, not both"}},
		{"list of lists", "sources:\n  - name: a\n" + ok + "    allowed-topics: [[a]]\n", []string{"allowed-topics", "list of lists"}},
		{"duplicate key", "sources:\n  - name: a\n" + ok + "    slot: x\n    slot: y\n", []string{"already defined"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFleet(t, tc.yaml)
			_, err := loadFleet(path, &scrubber{})
			if err == nil {
				t.Fatal("loaded")
			}
			if exitCode(err) != ExitUsage {
				t.Errorf("exit code %d, want %d (usage)", exitCode(err), ExitUsage)
			}
			for _, w := range append(tc.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestSourceFlagsReadNoEnvironment(t *testing.T) {
	t.Setenv("RELAY_SLOT", "from_env")
	t.Setenv("RELAY_BROKERS", "env:9092")
	path := writeFleet(t, "sources:\n  - name: a\n    database-url: postgres://u@db:5432/a\n    brokers: [k:9092]\n")
	fc, err := loadFleet(path, &scrubber{})
	if err != nil {
		t.Fatal(err)
	}
	if c := fc.Sources[0].Config; c.Slot == "from_env" || strings.Join(c.Kafka.Brokers, ",") != "k:9092" {
		t.Errorf("a source read the environment: slot %q brokers %v", c.Slot, c.Kafka.Brokers)
	}
}

// The fleet file of docs/fleet.md loads as written (its secret files
// created), and the error it shows for a typo is the one printed.
func TestFleetDocExample(t *testing.T) {
	dir := t.TempDir()
	example := testenv.MarkdownBlock(t, "../../docs/fleet.md", "# Fleet", "yaml")
	for _, name := range []string{"orders-eu", "orders-us", "billing"} {
		path := filepath.Join(dir, name+".url")
		if err := os.WriteFile(path, []byte("postgres://relay@"+name+".db:5432/app\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		example = strings.ReplaceAll(example, "/etc/pgoutbox/"+name+".url", path)
	}
	fc, err := loadFleet(writeFleet(t, example), &scrubber{})
	if err != nil {
		t.Fatalf("docs/fleet.md's example: %v", err)
	}
	if len(fc.Sources) != 3 || fc.Spread == nil || fc.Sources[2].Config.ExactlyOnce || !fc.Sources[0].Config.ExactlyOnce {
		t.Errorf("docs/fleet.md's example read as %+v", fc)
	}

	want := strings.TrimSpace(testenv.MarkdownBlock(t, "../../docs/fleet.md", "Validated as a whole", ""))
	typo := strings.Replace(example, "    topic-template: us.{aggregate_type}", "    tabel: us.{aggregate_type}", 1)
	path := writeFleet(t, typo)
	_, err = loadFleet(path, &scrubber{})
	if got := "relay: " + strings.ReplaceAll(fmt.Sprint(err), path, "fleet.yaml"); err == nil || got != want {
		t.Errorf("the typo's error\n%s\nis not the one docs/fleet.md shows\n%s", got, want)
	}
}

// A KEY-file setting takes exactly one path to a regular file under the
// size cap: a list, a mapping, a device or a FIFO is an error naming the
// key, never a panic (database-url-file: [] once crashed the process on a
// SIGHUP), an endless read (/dev/zero) or a blocked reload (a FIFO).
func TestLoadFleetSecretFileMustBeOnePathToARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, cliutil.MaxSecretFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	const head = "sources:\n  - name: a\n    brokers: [k:9092]\n"
	for _, tc := range []struct {
		name, value string
		want        []string
	}{
		{"empty list", "[]", []string{"database-url-file", "one path", "a list of 0"}},
		{"two paths", "[/a, /b]", []string{"database-url-file", "one path", "a list of 2"}},
		{"mapping", "{a: b}", []string{"database-url-file", "one path", "a mapping"}},
		{"number", "5", []string{"database-url-file", "one path", "int"}},
		{"no value", "", []string{"database-url-file"}},
		{"device", "/dev/zero", []string{"database-url-file", "/dev/zero", "not a regular file"}},
		{"fifo", fifo, []string{"database-url-file", fifo, "not a regular file"}},
		{"directory", dir, []string{"database-url-file", "not a regular file"}},
		{"too large", big, []string{"database-url-file", big, "larger than"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFleet(t, head+"    database-url-file: "+tc.value+"\n")
			_, err := loadFleet(path, &scrubber{})
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range append(tc.want, "sources[0] (a)") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	path := writeFleet(t, head+"    kafka-sasl-password-file: []\n    database-url: postgres://u@db/a\n")
	if _, err := loadFleet(path, &scrubber{}); err == nil || !strings.Contains(err.Error(), "kafka-sasl-password-file: want one path") {
		t.Errorf("kafka-sasl-password-file: []: %v", err)
	}
}

// A reload that fails, or panics, is refused as a whole with an error: the
// process and its running sources stay.
func TestFleetReloadRefusesAPanic(t *testing.T) {
	f := &fleet{}
	path := writeFleet(t, "sources:\n  - name: a\n    brokers: [k:9092]\n    database-url-file: []\n")
	if _, err := f.tryReload(path, &scrubber{}, &fleetConfig{}); err == nil || !strings.Contains(err.Error(), "want one path") {
		t.Errorf("database-url-file: []: %v", err)
	}
	// A nil scrubber panics as soon as the loader registers a secret:
	// it stands for any panic in the loader.
	path = writeFleet(t, "sources:\n  - name: a\n    brokers: [k:9092]\n    database-url: postgres://u:Secret99@db/a\n")
	next, err := f.tryReload(path, nil, &fleetConfig{})
	if err == nil || next != nil || !strings.Contains(err.Error(), "loading the file failed") {
		t.Errorf("a panicking load: %v, %v", next, err)
	}
}

// A changed fleet file or secret file is reported once two polls read the
// same new content: a file caught half-written is not applied.
func TestFileWatchWaitsForASettledChange(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "url")
	if err := os.WriteFile(secret, []byte("postgres://u:Pw111111@db/a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const head = "sources:\n  - name: a\n    brokers: [k:9092]\n"
	path := writeFleet(t, head+"    database-url-file: "+secret+"\n")
	fc, err := loadFleet(path, &scrubber{})
	if err != nil {
		t.Fatal(err)
	}
	w := &fileWatch{path: path}
	w.loaded(fc)
	if w.poll() {
		t.Fatal("an unchanged file reported as changed")
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(path, head+"    database-url-file: "+secret+"\n    slot: ha") // half-written
	if w.poll() {
		t.Error("a change reported at its first reading")
	}
	write(path, head+"    database-url-file: "+secret+"\n    slot: half_done\n")
	if w.poll() {
		t.Error("a file read differently at two polls reported as settled")
	}
	if !w.poll() {
		t.Error("a file read the same at two polls not reported")
	}
	if w.poll() {
		t.Error("one change reported twice")
	}
	fc, err = loadFleet(path, &scrubber{})
	if err != nil {
		t.Fatal(err)
	}
	w.loaded(fc)

	write(secret, "postgres://u:Pw222222@db/a\n") // a rotated password
	if w.poll() || !w.poll() {
		t.Error("a rotated secret file not reported once settled")
	}
	next, err := loadFleet(path, &scrubber{})
	if err != nil || next.Sources[0].settings == fc.Sources[0].settings {
		t.Errorf("a rotated secret does not change the source's settings (so it would not restart): %v", err)
	}
}

// In a fleet every source's dead-letter and progress topics are reserved
// for all the sources (a row of one tenant routed to another's is
// dead-lettered), the set follows a reload, a fleet whose sources may
// publish anywhere is warned about (refused with --strict-topics), and
// relay-instance names the source.
func TestFleetReservesEachSourcesTopics(t *testing.T) {
	path := writeFleet(t, `
defaults:
  brokers: [k:9092]
sources:
  - name: a
    database-url: postgres://u@db:5432/a
    allowed-topics: [a.]
  - name: b
    database-url: postgres://u@db:5432/b
    slot: b
    dlq-topic: b.dlq
    progress-topic: b.progress
`)
	fc, err := loadFleet(path, &scrubber{})
	if err != nil {
		t.Fatal(err)
	}
	a := fc.Sources[0].Config
	for _, topic := range []string{"b.dlq", "b.progress", "outbox.dlq", contract.DefaultProgressTopic} {
		if a.ReservedTopic == nil || !a.ReservedTopic(topic) {
			t.Errorf("source a may publish to %s, a topic the relay of source b writes", topic)
		}
	}
	if a.ReservedTopic("b.orders") {
		t.Error("source a may not publish to b.orders, a topic no relay writes")
	}

	f := &fleet{}
	f.reserved.set(fc.Sources[:1])
	if f.reserved.has("b.dlq") {
		t.Error("b.dlq reserved before source b is in the file")
	}
	f.reserved.set(fc.Sources)
	if !f.reserved.has("b.dlq") {
		t.Error("b.dlq not reserved once source b is in the file (a reload)")
	}

	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	if err := checkTopicBounds(fc.Sources, false, logger); err != nil || !strings.Contains(logs.String(), "sources without allowed-topics: b") {
		t.Errorf("no warning for source b without allowed-topics: %v, %q", err, logs.String())
	}
	err = checkTopicBounds(fc.Sources, true, logger)
	if err == nil || exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "--strict-topics: sources without allowed-topics: b") {
		t.Errorf("--strict-topics: %v", err)
	}
	if err := checkTopicBounds(fc.Sources[:1], true, logger); err != nil {
		t.Errorf("one source needs no allowed-topics: %v", err)
	}

	if got := instanceOf("pod-7", "b"); got != "pod-7/b" {
		t.Errorf("relay-instance %q, want pod-7/b", got)
	}
	if got := instanceOf("", "b"); got != "b" {
		t.Errorf("relay-instance without --instance-id %q, want b", got)
	}
}

// /status shows database hosts, slots and errors: with --status-addr it
// leaves the metrics address (served on its own, or with off not at all).
func TestFleetStatusCanLeaveTheMetricsAddress(t *testing.T) {
	f := &fleet{sources: map[string]*source{}, shared: relay.NewSharedBuffer(1 << 20), process: prometheus.NewRegistry()}
	for _, tc := range []struct {
		withStatus bool
		want       int
	}{{true, http.StatusOK}, {false, http.StatusNotFound}} {
		rec := httptest.NewRecorder()
		f.handler(tc.withStatus).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
		if rec.Code != tc.want {
			t.Errorf("with status %v: /status answered %d, want %d", tc.withStatus, rec.Code, tc.want)
		}
	}
	rec := httptest.NewRecorder()
	f.serveStatus(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"sources"`) {
		t.Errorf("/status on its own address: %d %s", rec.Code, rec.Body)
	}
}

// Every replica reports every source of the file in
// pgoutbox_fleet_source_running: 0 for one led elsewhere, so a source that
// is 0 on every replica (a foreign member of the group took it) raises
// PgoutboxFleetSourceNotRun.
func TestFleetReportsWhichSourcesRunHere(t *testing.T) {
	path := writeFleet(t, "defaults:\n  brokers: [k:9092]\nsources:\n  - name: a\n    database-url: postgres://u@db:5432/a\n  - name: b\n    database-url: postgres://u@db:5432/b\n    slot: b\n")
	fc, err := loadFleet(path, &scrubber{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{sources: map[string]*source{}, shared: relay.NewSharedBuffer(1 << 20), process: prometheus.NewRegistry(), spread: true, desired: fc.Sources}
	f.running = relaymetrics.NewFleetSourceRunning()
	f.process.MustRegister(f.running)
	mfs, err := f.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "pgoutbox_fleet_source_running" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	if len(got) != 2 || got["a"] != 0 || got["b"] != 0 {
		t.Errorf("pgoutbox_fleet_source_running %v, want a and b at 0 (led elsewhere)", got)
	}
}
