package relaycli_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

const sinksDoc = "../../docs/sinks.md"

// quickStartStreams creates the streams of docs/sinks.md's NATS quick
// start; the text between the markers is the page's Go block.
func quickStartStreams(ctx context.Context, js jetstream.JetStream, replicas int) error {
	// quick start: begin
	for _, cfg := range []jetstream.StreamConfig{
		// The relay's subjects, its dead letters (outbox.dlq.*) included.
		{Name: "OUTBOX", Subjects: []string{"outbox.>"}, Storage: jetstream.FileStorage,
			Replicas: replicas, Duplicates: 2 * time.Minute, AllowAtomicPublish: true},
		// The inbox loops' dead letters.
		{Name: "DLQ", Subjects: []string{"inbox.dlq"}, Storage: jetstream.FileStorage, Replicas: replicas},
	} {
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			return err
		}
	}
	// quick start: end
	return nil
}

// docsGoBlockIsTested fails unless the Go block of docs/sinks.md's NATS
// quick start is quickStartStreams' marked text (indentation aside).
func docsGoBlockIsTested(t *testing.T) {
	t.Helper()
	src, err := os.ReadFile("sink_quickstart_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(src), "// quick start: begin\n")
	body, _, _ = strings.Cut(body, "\t// quick start: end")
	var code []string
	for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		code = append(code, strings.TrimPrefix(l, "\t"))
	}
	doc := strings.TrimRight(testenv.MarkdownBlock(t, sinksDoc, "## NATS JetStream", "go"), "\n")
	if got := strings.Join(code, "\n"); got != doc {
		t.Fatalf("docs/sinks.md's quick start Go block:\n%s\nis not the code the test runs:\n%s", doc, got)
	}
}

// docs/sinks.md's NATS quick start, as written: the nats-server line's
// flags and the page's nats.conf parsed by the server's own command-line
// parser (sync_interval: always is honoured), the Go block creating the
// streams, and the relay run line publishing to them, with a temporary
// store directory, a free port and a test database.
func TestNATSQuickStart(t *testing.T) {
	t.Parallel()
	docsGoBlockIsTested(t)
	f := setupDone(t)
	dir := t.TempDir()
	const docStore, docURL = "/var/lib/nats", "nats://127.0.0.1:4222"
	conf := testenv.MarkdownBlock(t, sinksDoc, "### Safe server settings", "")
	if err := os.WriteFile(filepath.Join(dir, "nats.conf"), []byte(strings.ReplaceAll(conf, docStore, dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	lines := testenv.ShBlock(t, sinksDoc, "## NATS JetStream", map[string]string{"DATABASE_URL": f.db.URL})
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "nats-server ") || !strings.HasPrefix(lines[1], "relay run ") {
		t.Fatalf("quick start lines %q: want nats-server, then relay run", lines)
	}
	args := strings.Fields(strings.ReplaceAll(lines[0], docStore, dir))[1:]
	for i, a := range args {
		if a == "nats.conf" {
			args[i] = filepath.Join(dir, a)
		}
	}
	opts, err := server.ConfigureOptions(flag.NewFlagSet("nats-server", flag.ContinueOnError), args, nil, nil, nil)
	if err != nil {
		t.Fatalf("nats-server %s: %v", strings.Join(args, " "), err)
	}
	if !opts.JetStream || opts.StoreDir != dir || !opts.SyncAlways || opts.Port != 0 {
		t.Fatalf("nats-server options: JetStream %v, store %q, sync always %v, port %d; want true, %q, true, the default",
			opts.JetStream, opts.StoreDir, opts.SyncAlways, opts.Port, dir)
	}
	opts.Host, opts.Port, opts.NoSigs, opts.NoLog = "127.0.0.1", -1, true, true // a free port, not 4222
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats-server not ready within 30s")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := quickStartStreams(t.Context(), js, 1); err != nil {
		t.Fatal(err)
	}

	run := strings.Fields(strings.ReplaceAll(lines[1], docURL, srv.ClientURL()))[1:]
	r := start(t, append(append(run, "--metrics-addr", "127.0.0.1:0", "--log-format", "json"), f.args[2:]...)...)
	for i := range 3 {
		f.exec(t, `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, business_key, payload) VALUES ('order', 'a', 'created', $1, '{}')`, fmt.Sprintf("bk-%d", i))
	}
	s, err := js.Stream(t.Context(), "OUTBOX")
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 60*time.Second, "three messages in OUTBOX", func() (bool, error) {
		info, err := s.Info(t.Context())
		return err == nil && info.State.Msgs >= 3, nil
	})
	r.stop(t)
}
