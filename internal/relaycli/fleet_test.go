package relaycli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/internal/relaycli"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// fleetSource is a source of a fleet test: a database with the outbox
// set up, and the fleet file's entry for it.
func fleetSource(t *testing.T, name string) (*fixture, string) {
	t.Helper()
	f := setupDone(t)
	return f, fmt.Sprintf("  - name: %s\n    database-url: %s\n    slot: %s\n    publication: pub_%s\n", name, f.db.URL, f.slot, f.slot)
}

// insert writes one outbox row of aggregate type typ.
func insert(t *testing.T, f *fixture, typ, id string) {
	t.Helper()
	_, err := f.db.Pool.Exec(context.Background(),
		`INSERT INTO outbox (aggregate_type, aggregate_id, event_type, business_key, payload) VALUES ($1, $2, 'created', $2, '{}')`, typ, id)
	if err != nil {
		t.Fatal(err)
	}
}

// statuses reads /status.
func statuses(t *testing.T, base string) map[string]string {
	t.Helper()
	code, body := get(t, base+"/status")
	var st struct {
		Sources []struct{ Name, State, Error string }
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("/status: %d %s", code, body)
	}
	out := map[string]string{}
	for _, s := range st.Sources {
		out[s.Name] = s.State
	}
	return out
}

// waitReady waits until GET path answers 200.
func waitReady(t *testing.T, url string, logs *testenv.SyncBuffer) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		code, body := get(t, url)
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d %s\n%s", url, code, body, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// One relay run --config process relays two databases, each with its own
// slot and metrics labelled by source; SIGHUP removes one and adds two,
// one of them unreachable, without touching the source that stays, and
// the unreachable one stalls nobody.
func TestFleetRunsSourcesAndReloads(t *testing.T) {
	kafka := testenv.NewKafka(t)
	a, aEntry := fleetSource(t, "alpha")
	b, bEntry := fleetSource(t, "beta")
	c, cEntry := fleetSource(t, "gamma")
	e := setup(t) // no relay setup: with no-create, its relay stops at once
	eEntry := fmt.Sprintf("  - name: epsilon\n    database-url: %s\n    slot: %s\n    publication: pub_%s\n    no-create: true\n", e.db.URL, e.slot, e.slot)
	dEntry := fmt.Sprintf("  - name: delta\n    database-url: postgres://pgoutbox@%s/nowhere?connect_timeout=1\n    slot: delta\n", closedAddr(t))
	head := fmt.Sprintf("defaults:\n  brokers: [%s]\n  batch-timeout: 1ms\nsources:\n", kafka.Brokers[0])
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte(head+aEntry+bEntry+eEntry), 0o600); err != nil {
		t.Fatal(err)
	}

	rel := startFleet(t, path)
	base, stderr := rel.base, rel.stderr
	waitReady(t, base+"/readyz?source=alpha", stderr)
	waitReady(t, base+"/readyz?source=beta", stderr)

	insert(t, a, "alpha", "a-1")
	insert(t, b, "beta", "b-1")
	testenv.WaitForRecords(t, kafka.Brokers, "outbox.alpha", 1, time.Minute)
	testenv.WaitForRecords(t, kafka.Brokers, "outbox.beta", 1, time.Minute)
	_, metrics := get(t, base+"/metrics")
	for _, want := range []string{`source="alpha"`, `source="beta"`, "go_goroutines"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for statuses(t, base)["epsilon"] != "failed" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if st := statuses(t, base); st["alpha"] != "streaming" || st["beta"] != "streaming" || st["epsilon"] != "failed" {
		t.Fatalf("/status %v, want alpha and beta streaming, epsilon failed", st)
	}
	if _, body := get(t, base+"/status"); !strings.Contains(body, "run relay setup") {
		t.Errorf("/status does not say why epsilon failed: %s", body)
	}

	if err := os.WriteFile(path, []byte(head+aEntry+cEntry+dEntry), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitReady(t, base+"/readyz?source=gamma", stderr)
	insert(t, a, "alpha", "a-2")
	insert(t, c, "gamma", "c-1")
	testenv.WaitForRecords(t, kafka.Brokers, "outbox.alpha", 2, time.Minute)
	testenv.WaitForRecords(t, kafka.Brokers, "outbox.gamma", 1, time.Minute)
	if code, _ := get(t, base+"/readyz?source=beta"); code != http.StatusNotFound {
		t.Errorf("/readyz?source=beta after its removal: %d, want 404", code)
	}
	if code, _ := get(t, base+"/readyz?source=delta"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz?source=delta (unreachable): %d, want 503", code)
	}
	if code, _ := get(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with delta unreachable: %d, want 503", code)
	}
	if row := b.slotRow(t); row.active {
		t.Error("beta's slot is still streamed after its removal")
	}
	if n := strings.Count(stderr.String(), `"msg":"source starting","source":"alpha"`); n != 1 {
		t.Errorf("alpha started %d times, want once (a reload must not touch an unchanged source)", n)
	}

	// A file that does not load leaves the sources running.
	if err := os.WriteFile(path, []byte(head+aEntry+"    tabel: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "reload refused") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if st := statuses(t, base); st["alpha"] != "streaming" || st["gamma"] != "streaming" {
		t.Errorf("/status %v after a refused reload, want alpha and gamma streaming", st)
	}

	rel.stop(t)
}

// Per-source settings beside --config are refused: they belong in the
// file.
func TestFleetRefusesSourceFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte("sources:\n  - name: a\n    database-url: postgres://u@db/a\n    brokers: [k:9092]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "run", "--config", path, "--slot", "x")
	wantCode(t, r, relaycli.ExitUsage)
	wantOneErrorLine(t, r.stderr, "--config", "--slot", "move")
	// A secret's variable is named once, with its flag and its file
	// variant (RELAY_DATABASE_URL was named twice).
	t.Setenv("RELAY_DATABASE_URL", "postgres://u@db/a")
	r = cli(t, "run", "--config", path)
	wantCode(t, r, relaycli.ExitUsage)
	wantOneErrorLine(t, r.stderr, "move --database-url, RELAY_DATABASE_URL or RELAY_DATABASE_URL_FILE into it")
	if n := strings.Count(r.stderr, "RELAY_DATABASE_URL "); n != 1 {
		t.Errorf("RELAY_DATABASE_URL named %d times: %s", n, r.stderr)
	}
}

// --fleet-buffer-bytes is a fleet's: a single relay refuses it, and a
// fleet a budget of nothing.
func TestFleetBufferNeedsConfig(t *testing.T) {
	r := cli(t, "run", "--database-url", "postgres://u@db/a", "--brokers", "k:9092", "--fleet-buffer-bytes", "64MiB")
	wantCode(t, r, relaycli.ExitUsage)
	wantOneErrorLine(t, r.stderr, "--fleet-buffer-bytes", "--config", "--buffer-bytes")
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte("sources:\n  - name: a\n    database-url: postgres://u@db/a\n    brokers: [k:9092]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "run", "--config", path, "--fleet-buffer-bytes", "0")
	wantCode(t, r, relaycli.ExitUsage)
	wantOneErrorLine(t, r.stderr, "--fleet-buffer-bytes 0")
}

// startFleet starts relay run --config path in-process: one replica of a
// spread test.
func startFleet(t *testing.T, path string) *running {
	t.Helper()
	return start(t, "run", "--config", path, "--metrics-addr", "127.0.0.1:0", "--log-format", "json")
}

// waitLeaders waits until every source streams on exactly one replica
// and each replica leads want[i] of them (in any order when want has two
// counts and they differ), and returns each source's replica.
func waitLeaders(t *testing.T, names []string, want []int, rs ...*running) map[string]int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		leaders := map[string]int{}
		where := map[string]int{}
		counts := make([]int, len(rs))
		for i, r := range rs {
			for name, state := range statuses(t, r.base) {
				if state == "streaming" {
					leaders[name]++
					where[name] = i
					counts[i]++
				}
			}
		}
		ok := len(leaders) == len(names)
		for _, n := range leaders {
			ok = ok && n == 1
		}
		same := true
		for i := range want {
			same = same && counts[i] == want[i]
		}
		if len(want) == 2 && len(counts) == 2 && counts[0] == want[1] && counts[1] == want[0] {
			same = true
		}
		if ok && same {
			return where
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, r := range rs {
				logs.WriteString(r.stderr.String())
			}
			t.Fatalf("leaders %v, per replica %v; want each source once, per replica %v\n%s", leaders, counts, want, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Two replicas running one fleet file with spread: share its four sources
// two and two; when one stops, the other leads all four and nothing is
// lost.
func TestFleetSpreadsLeadership(t *testing.T) {
	kafka := testenv.NewKafka(t)
	names := []string{"s1", "s2", "s3", "s4"}
	var fixtures []*fixture
	var file strings.Builder
	fmt.Fprintf(&file, "spread:\n  group: fleet-test-%d\n  session-timeout: 6s\ndefaults:\n  brokers: [%s]\n  batch-timeout: 1ms\n  standby-retry-interval: 200ms\nsources:\n", os.Getpid(), kafka.Brokers[0])
	for _, n := range names {
		f, entry := fleetSource(t, n)
		fixtures = append(fixtures, f)
		file.WriteString(entry)
	}
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	a := startFleet(t, path)
	waitLeaders(t, names, []int{4}, a)
	b := startFleet(t, path)
	before := waitLeaders(t, names, []int{2, 2}, a, b)

	// A source appended to the file moves no running source.
	f5, e5 := fleetSource(t, "s5")
	if err := os.WriteFile(path, []byte(file.String()+e5), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil { // both replicas reload
		t.Fatal(err)
	}
	names = append(names, "s5")
	fixtures = append(fixtures, f5)
	after := waitLeaders(t, names, []int{3, 2}, a, b)
	for n, r := range before {
		if after[n] != r {
			t.Errorf("source %s moved from replica %d to %d when s5 was appended", n, r, after[n])
		}
	}
	waitReady(t, a.base+"/readyz", a.stderr)
	waitReady(t, b.base+"/readyz", b.stderr)
	for i, f := range fixtures {
		insert(t, f, names[i], "first")
	}
	for _, n := range names {
		testenv.WaitForRecords(t, kafka.Brokers, "outbox."+n, 1, time.Minute)
	}

	a.stop(t)
	waitLeaders(t, names, []int{5}, b)
	for i, f := range fixtures {
		insert(t, f, names[i], "second")
	}
	for _, n := range names {
		testenv.WaitForRecords(t, kafka.Brokers, "outbox."+n, 2, time.Minute)
	}
	b.stop(t)
}

// relay status --config shows every source under its name and exits 1
// naming the unhealthy ones.
func TestFleetStatus(t *testing.T) {
	kafka := testenv.NewKafka(t)
	_, aEntry := fleetSource(t, "alpha")
	_, bEntry := fleetSource(t, "beta")
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	file := fmt.Sprintf("defaults:\n  brokers: [%s]\nsources:\n", kafka.Brokers[0]) + aEntry + bEntry
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "status", "--config", path)
	wantCode(t, r, 1)
	wantOneErrorLine(t, r.stderr, "unhealthy sources", "alpha (", "beta (", "no relay")

	rep := startFleet(t, path)
	waitReady(t, rep.base+"/readyz", rep.stderr)
	r = cli(t, "status", "--config", path)
	wantCode(t, r, 0)
	for _, want := range []string{"source alpha\n", "source beta\n", "confirmed_flush_lsn"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("relay status --config does not print %q:\n%s", want, r.stdout)
		}
	}
	r = cli(t, "status", "--config", path, "--source", "beta", "--json")
	wantCode(t, r, 0)
	var out struct {
		Sources []struct {
			Name   string
			Status struct{ Slot string }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Sources) != 1 || out.Sources[0].Name != "beta" || out.Sources[0].Status.Slot == "" {
		t.Errorf("relay status --config --source beta --json: %v\n%s", err, r.stdout)
	}
	wantCode(t, cli(t, "status", "--config", path, "--source", "gamma"), relaycli.ExitUsage)
	wantCode(t, cli(t, "status", "--source", "beta"), relaycli.ExitUsage)
	rep.stop(t)
}

// Two sources that reach one server by two names (an address and a DNS
// name, or a socket directory spelled two ways) pass the file's check by
// host and port; relay status --config and relay setup --config tell them
// apart by the server's system identifier, and name the slot both use.
func TestFleetStatusFindsOneSlotUnderTwoHostNames(t *testing.T) {
	f := setupDone(t)
	pg, err := pgconn.ParseConfig(f.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	alias := map[string]string{"127.0.0.1": "localhost", "localhost": "127.0.0.1"}[pg.Host]
	if strings.HasPrefix(pg.Host, "/") {
		alias = pg.Host + "/" // the same socket directory
	}
	if alias == "" {
		t.Skipf("no second name for host %s", pg.Host)
	}
	u, err := url.Parse(f.db.URL)
	if err != nil || u.Host == "" && !strings.HasPrefix(pg.Host, "/") {
		t.Skipf("database URL not in URL form: %v", err)
	}
	other := strings.Replace(f.db.URL, pg.Host, alias, 1)
	if strings.HasPrefix(pg.Host, "/") {
		q := u.Query()
		q.Set("host", alias)
		u.RawQuery = q.Encode()
		other = u.String()
	}
	entry := func(name, url string) string {
		return fmt.Sprintf("  - name: %s\n    database-url: %s\n    slot: %s\n    publication: pub_%s\n", name, url, f.slot, f.slot)
	}
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	file := "defaults:\n  brokers: [k:9092]\nsources:\n" + entry("one", f.db.URL) + entry("two", other)
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"status", "setup"} {
		r := cli(t, cmd, "--config", path)
		wantCode(t, r, 1)
		for _, want := range []string{"slot \"" + f.slot + "\" is also the slot of source two on the same server", "also the slot of source one"} {
			if !strings.Contains(r.stdout+r.stderr, want) {
				t.Errorf("relay %s --config does not say %q:\n%s\n%s", cmd, want, r.stdout, r.stderr)
			}
		}
	}
}

// bufferBytes reads the shared buffer's size in /status.
func bufferBytes(t *testing.T, base string) int64 {
	t.Helper()
	code, body := get(t, base+"/status")
	var st struct{ Buffer struct{ Bytes, Used int64 } }
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("/status: %d %s", code, body)
	}
	return st.Buffer.Bytes
}

// A changed fleet file is reloaded without a signal (a Secret volume is
// updated in place), and --instance-id, a process setting, reaches every
// source's records. The sources share one buffer of --fleet-buffer-bytes,
// or of their --buffer-bytes together when that is less, resized at the
// reload.
func TestFleetReloadsAChangedFile(t *testing.T) {
	defer relaycli.SetConfigPollInterval(100 * time.Millisecond)()
	kafka := testenv.NewKafka(t)
	a, aEntry := fleetSource(t, "alpha")
	b, bEntry := fleetSource(t, "beta")
	head := fmt.Sprintf("defaults:\n  brokers: [%s]\n  batch-timeout: 1ms\n  buffer-bytes: 2MiB\nsources:\n", kafka.Brokers[0])
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte(head+aEntry), 0o600); err != nil {
		t.Fatal(err)
	}
	rel := start(t, "run", "--config", path, "--metrics-addr", "127.0.0.1:0", "--log-format", "json", "--instance-id", "pod-7",
		"--fleet-buffer-bytes", "3MiB")
	base, stderr := rel.base, rel.stderr
	waitReady(t, base+"/readyz?source=alpha", stderr)
	if got := bufferBytes(t, base); got != 2<<20 {
		t.Errorf("shared buffer of one source of 2 MiB: %d bytes, want 2 MiB", got)
	}

	// Written elsewhere and renamed into place, as the kubelet does.
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(head+aEntry+bEntry), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitReady(t, base+"/readyz?source=beta", stderr)
	if got := bufferBytes(t, base); got != 3<<20 {
		t.Errorf("shared buffer of two sources of 2 MiB: %d bytes, want --fleet-buffer-bytes 3 MiB", got)
	}
	insert(t, a, "alpha", "a-1")
	insert(t, b, "beta", "b-1")
	for _, topic := range []string{"outbox.alpha", "outbox.beta"} {
		recs := testenv.WaitForRecords(t, kafka.Brokers, topic, 1, time.Minute)
		if v, _ := recs[0].Header("relay-instance"); v != "pod-7/"+strings.TrimPrefix(topic, "outbox.") {
			t.Errorf("%s: relay-instance header %q, want pod-7/SOURCE (--instance-id and the source)", topic, v)
		}
	}
	if n := strings.Count(stderr.String(), `"why":"the file changed"`); n != 1 {
		t.Errorf("%d reloads for one change of the file, want 1", n)
	}
}

// relay verify --config audits every source over one window, each report
// under its name, the gauges labelled source (in the metrics file, and
// one Pushgateway group per source), and exits 1 naming the source whose
// window is not clean.
func TestFleetVerify(t *testing.T) {
	kafka := testenv.NewBroker(t)
	a, aEntry := fleetSource(t, "alpha")
	b, bEntry := fleetSource(t, "beta")
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	file := fmt.Sprintf("defaults:\n  brokers: [%s]\n  batch-timeout: 1ms\n  topic-template: %s\nsources:\n", kafka.Brokers[0], kafka.Topic("outbox.{aggregate_type}")) + aEntry + bEntry
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	rep := startFleet(t, path)
	waitReady(t, rep.base+"/readyz", rep.stderr)
	insert(t, a, "alpha", "a-1")
	insert(t, b, "beta", "b-1")
	testenv.WaitForRecords(t, kafka.Brokers, kafka.Topic("outbox.alpha"), 1, time.Minute)
	testenv.WaitForRecords(t, kafka.Brokers, kafka.Topic("outbox.beta"), 1, time.Minute)

	var pushed []string
	var mu sync.Mutex
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		pushed = append(pushed, r.URL.Path)
		mu.Unlock()
	}))
	defer gw.Close()
	metricsFile := filepath.Join(t.TempDir(), "verify.prom")
	args := []string{"verify", "--config", path, "--since", "1h", "--grace", "0", "--metrics-file", metricsFile, "--pushgateway", gw.URL, "--pushgateway-insecure"}
	r := cli(t, args...)
	wantCode(t, r, 0)
	for _, want := range []string{"source alpha\n", "source beta\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("relay verify --config does not print %q:\n%s", want, r.stdout)
		}
	}
	prom, err := os.ReadFile(metricsFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`pgoutbox_verify_ok{source="alpha",table="public.outbox"} 1`, `pgoutbox_verify_ok{source="beta",table="public.outbox"} 1`} {
		if !strings.Contains(string(prom), want) {
			t.Errorf("metrics file lacks %s:\n%s", want, prom)
		}
	}
	mu.Lock()
	paths := slices.Clone(pushed)
	mu.Unlock()
	got := strings.Join(paths, " ")
	for _, source := range []string{"alpha", "beta"} {
		found := false
		for _, p := range paths { // the grouping labels come in either order
			found = found || strings.Contains(p+"/", "/source/"+source+"/") && strings.Contains(p+"/", "/table/public.outbox/")
		}
		if !found {
			t.Errorf("pushes %s: none to the group of source %s, table public.outbox", got, source)
		}
	}

	// A row of beta's that no relay publishes: beta is not clean, alpha is.
	rep.stop(t)
	insert(t, b, "beta", "b-2")
	r = cli(t, "verify", "--config", path, "--since", "1h", "--grace", "0", "--json")
	wantCode(t, r, 1)
	wantOneErrorLine(t, r.stderr, "sources not clean: beta (", "missing")
	if strings.Contains(r.stderr, "alpha") {
		t.Errorf("alpha named as not clean: %s", r.stderr)
	}
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	var n int
	for dec.More() {
		var out struct {
			Source string
			Report struct{ Rows, Missing int }
		}
		if err := dec.Decode(&out); err != nil {
			t.Fatalf("--json: %v\n%s", err, r.stdout)
		}
		if out.Source == "beta" && out.Report.Missing != 1 || out.Source == "alpha" && out.Report.Missing != 0 {
			t.Errorf("--json: %+v", out)
		}
		n++
	}
	if n != 2 {
		t.Errorf("--json printed %d reports, want 2", n)
	}
	wantCode(t, cli(t, "verify", "--config", path, "--source", "gamma"), relaycli.ExitUsage)
	wantCode(t, cli(t, "verify", "--config", path, "--table", "x"), relaycli.ExitUsage)
}

// relay setup --config sets up every source of the file from empty
// databases (or one with --source), each under its name; a source that
// cannot be set up does not stop the others, and the command exits 1
// naming it.
func TestFleetSetup(t *testing.T) {
	t.Parallel()
	a, b := setup(t), setup(t)
	entry := func(name string, f *fixture) string {
		return fmt.Sprintf("  - name: %s\n    database-url: %s\n    slot: %s\n    publication: pub_%s\n", name, f.db.URL, f.slot, f.slot)
	}
	head := "defaults:\n  brokers: [127.0.0.1:1]\nsources:\n"
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte(head+entry("alpha", a)+entry("beta", b)), 0o600); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "setup", "--config", path, "--source", "beta")
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "source alpha") || !strings.Contains(r.stdout, "source beta\ntable public.outbox: created") {
		t.Fatalf("setup --source beta:\n%s", r.stdout)
	}
	r = cli(t, "setup", "--config", path)
	wantCode(t, r, 0)
	for _, want := range []string{"source alpha\ntable public.outbox: created", "slot " + a.slot + ": created",
		"source beta\ntable public.outbox: exists", "slot " + b.slot + ": exists"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("setup --config: no %q in\n%s", want, r.stdout)
		}
	}
	st := cli(t, "status", "--config", path)
	if strings.Contains(st.stdout, "does not exist") {
		t.Errorf("after setup --config, status says:\n%s", st.stdout)
	}

	// A source whose database refuses: the other is still set up.
	c := setup(t)
	bad := "  - name: gamma\n    database-url: postgres://nobody@127.0.0.1:1/none?connect_timeout=2\n    slot: gamma\n"
	if err := os.WriteFile(path, []byte(head+bad+entry("delta", c)), 0o600); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "setup", "--config", path)
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, "source delta\ntable public.outbox: created") || !strings.Contains(r.stderr, "sources not set up: gamma (") {
		t.Errorf("setup with one bad source:\nstdout %s\nstderr %s", r.stdout, r.stderr)
	}
	wantCode(t, cli(t, "setup", "--config", path, "--source", "nope"), 2)
}
