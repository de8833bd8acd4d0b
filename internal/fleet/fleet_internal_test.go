package fleet

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	return testenv.TempFile(t, "fleet.yaml", yaml)
}

// testParser reads the few settings these tests give, as the command
// line's parser would (internal/relaycli tests the file through relay
// run's own flags).
func testParser() *Parser {
	keys := map[string]bool{"database-url": true, "database-url" + FileSuffix: true, "brokers": true, "slot": true,
		"dlq-topic": true, "progress-topic": true, "allowed-topics": true}
	return &Parser{Keys: keys, Secrets: []string{"database-url"}, Process: []string{"metrics-addr"},
		Env: func(flag string) string { return "RELAY_" + strings.ToUpper(flag) },
		Parse: func(args []string) (*relay.Config, error) {
			cfg := &relay.Config{Slot: relay.DefaultSlot}
			for _, a := range args {
				k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				switch k {
				case "database-url":
					cfg.DatabaseURL = v
				case "brokers":
					cfg.Kafka.Brokers = append(cfg.Kafka.Brokers, v)
				case "slot":
					cfg.Slot = v
				case "dlq-topic":
					cfg.DeadLetterTopic = v
				case "progress-topic":
					cfg.Kafka.ProgressTopic = v
				case "allowed-topics":
					cfg.AllowedTopics = append(cfg.AllowedTopics, v)
				}
			}
			return cfg, nil
		}}
}

// The same file read twice has the same settings: a reload of an
// unchanged file restarts no source.
func TestLoadIsCanonical(t *testing.T) {
	path := writeFleet(t, "defaults:\n  brokers: [k1:9092, k2:9092]\nsources:\n  - name: a\n    database-url: postgres://u@db:5432/a\n    allowed-topics: [a., b.]\n")
	one, err := Load(path, testParser())
	if err != nil {
		t.Fatal(err)
	}
	two, err := Load(path, testParser())
	if err != nil || one.Sources[0].settings != two.Sources[0].settings {
		t.Errorf("the same file read twice has other settings: %v", err)
	}
}

// A reload that fails, or panics, is refused as a whole with an error: the
// process and its running sources stay.
func TestFleetReloadRefusesAPanic(t *testing.T) {
	f := &fleet{}
	path := writeFleet(t, "sources:\n  - name: a\n    brokers: [k:9092]\n    database-url-file: []\n")
	if _, err := f.tryReload(path, testParser(), &File{}); err == nil || !strings.Contains(err.Error(), "want one path") {
		t.Errorf("database-url-file: []: %v", err)
	}
	// A parser that panics stands for any panic in the loader.
	path = writeFleet(t, "sources:\n  - name: a\n    brokers: [k:9092]\n    database-url: postgres://u:Secret99@db/a\n")
	panics := testParser()
	panics.Parse = func([]string) (*relay.Config, error) { panic("a bug") }
	next, err := f.tryReload(path, panics, &File{})
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
	fc, err := Load(path, testParser())
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
	fc, err = Load(path, testParser())
	if err != nil {
		t.Fatal(err)
	}
	w.loaded(fc)

	write(secret, "postgres://u:Pw222222@db/a\n") // a rotated password
	if w.poll() || !w.poll() {
		t.Error("a rotated secret file not reported once settled")
	}
	next, err := Load(path, testParser())
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
	fc, err := Load(path, testParser())
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
	if err == nil || !cliutil.IsUsage(err) || !strings.Contains(err.Error(), "--strict-topics: sources without allowed-topics: b") {
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

// /readyz fails until the fleet has set up the sources of its file: the
// metrics address serves first, and a fleet with no source yet had none
// that was not streaming, so /readyz said ready while no relay streamed
// (relay status --config then found every slot inactive, under load).
func TestReadyzFailsBeforeTheSourcesStart(t *testing.T) {
	for _, spread := range []bool{false, true} {
		f := &fleet{sources: map[string]*source{}, shared: relay.NewSharedBuffer(1 << 20), process: prometheus.NewRegistry(), spread: spread, joined: spread}
		rec := httptest.NewRecorder()
		f.handler(false).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "starting the sources") {
			t.Errorf("spread %v: /readyz before the sources started: %d %q, want 503 starting the sources", spread, rec.Code, rec.Body)
		}
	}
}

// Every replica reports every source of the file in
// pgoutbox_fleet_source_running: 0 for one led elsewhere, so a source that
// is 0 on every replica (a foreign member of the group took it) raises
// PgoutboxFleetSourceNotRun.
func TestFleetReportsWhichSourcesRunHere(t *testing.T) {
	path := writeFleet(t, "defaults:\n  brokers: [k:9092]\nsources:\n  - name: a\n    database-url: postgres://u@db:5432/a\n  - name: b\n    database-url: postgres://u@db:5432/b\n    slot: b\n")
	fc, err := Load(path, testParser())
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
