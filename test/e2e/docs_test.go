package e2e

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// docFrom returns the doc file from heading on.
func docFrom(t *testing.T, doc, heading string) string {
	t.Helper()
	return testenv.MarkdownFrom(t, filepath.Join("../../docs", doc), heading)
}

// docBlock returns the first fenced block of kind (sh, sql) after heading
// in the doc file.
func docBlock(t *testing.T, doc, heading, kind string) string {
	t.Helper()
	return testenv.MarkdownBlock(t, filepath.Join("../../docs", doc), heading, kind)
}

// runScript runs script with sh -e in dir and fails the test on an error.
func runScript(t *testing.T, script, dir string, env []string) string {
	t.Helper()
	cmd := exec.Command("sh", "-ec", script)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s\n%v\n%s", script, err, out)
	}
	return string(out)
}

// The shell blocks users run from docs/producers.md and docs/requirements.md
// run as written against a test Postgres and kfake: the psql route builds
// the whole table (the page's plain-SQL INSERT then works, and relay setup
// accepts it), and the least-privilege recipe creates what it assumes, in
// an order that works, ending with a relay that streams as role relay a
// row app_writer inserted.
func TestDocsShellBlocks(t *testing.T) {
	bin := buildBinaries(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	path := "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")

	t.Run("producers psql route", func(t *testing.T) {
		db := testenv.NewDB(t)
		env := append(os.Environ(), path, "DATABASE_URL="+db.URL, "RELAY_METRICS_ADDR=127.0.0.1:0")
		runScript(t, docBlock(t, "producers.md", "# Producers", "sh"), root, env)
		insert := docBlock(t, "producers.md", "## The column contract", "sql")
		insert = insert[:strings.Index(insert, ";")+1]
		runScript(t, `psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -c "$INSERT"`, root, append(env, "INSERT="+insert))
		runScript(t, `relay setup --database-url "$DATABASE_URL"`, root, env)
	})

	t.Run("least-privilege recipe", func(t *testing.T) {
		srv := testenv.NewServer(t)
		u, err := url.Parse(srv.AdminURL)
		if err != nil {
			t.Fatal(err)
		}
		k := testenv.NewKafka(t, kfake.SeedTopics(1, "outbox.order"))
		env := append(os.Environ(), path, "PGHOST="+u.Hostname(), "PGPORT="+u.Port(), "PGUSER="+u.User.Username(),
			"KAFKA_BROKERS="+strings.Join(k.Brokers, ","), "RELAY_METRICS_ADDR=127.0.0.1:0")
		block := strings.TrimRight(docBlock(t, "requirements.md", "## A least-privilege role", "sh"), "\n")
		last := strings.LastIndex(block, "\n")
		script, run := block[:last], block[last+1:]
		if !strings.HasPrefix(run, "relay run ") {
			t.Fatalf("the recipe ends with %q, want relay run", run)
		}
		// The recipe draws no note from relay setup (an outbox other than
		// the default one on the default slot name drew one).
		if out := runScript(t, script, root, env); strings.Contains(out, "note:") {
			t.Errorf("the recipe draws a note:\n%s", out)
		}
		// relay run, after the recipe's export.
		exports := runScript(t, script[strings.Index(script, "export "):strings.Index(script, "\nrelay setup")]+"\nenv | grep ^RELAY_", root, env)
		env = append(env, strings.Fields(exports)...)
		out, stop := startLine(t, run, root, env)
		runScript(t, `psql -U app_writer -d app -v ON_ERROR_STOP=1 -c "INSERT INTO app.outbox (aggregate_type, aggregate_id, event_type, business_key, payload)
			VALUES ('order', '42', 'order.placed', 'order-42-placed', '{}')"`, root, env)
		ctx := context.Background()
		testenv.WaitFor(t, 2*time.Minute, "the row on outbox.order", func() (bool, error) {
			recs, err := testenv.ReadTopic(ctx, k.Brokers, "outbox.order")
			return len(recs) == 1, err
		})
		stop()
		if strings.Contains(out.String(), "level=ERROR") {
			t.Errorf("relay run logged errors:\n%s", out.String())
		}
	})
}
