package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// The RabbitMQ quick start of docs/sinks.md runs as written against a
// node of the test's own, with the commands Debian's rabbitmq-server
// package installs (rabbitmq-plugins, rabbitmqadmin, rabbitmqctl): it
// enables the management plugin, declares the streams, adds the relay's
// user, sets the outbox up and starts the relay, and a row inserted into
// the outbox then reaches outbox.payment. Only the stream port of the
// relay's URL is replaced by the node's, and rabbitmqadmin finds the
// node's management port in HOME's .rabbitmqadmin.conf
// (testenv.RabbitMQ.CommandEnv).
func TestDocsRabbitMQQuickStart(t *testing.T) {
	if _, err := testenv.RabbitMQInstalled(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	for _, tool := range []string{"rabbitmqadmin", "/usr/lib/rabbitmq/bin/rabbitmq-plugins", "/usr/lib/rabbitmq/bin/rabbitmqctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s is not installed (Debian: apt-get install rabbitmq-server)", tool)
		}
	}
	bin := buildBinaries(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	r, err := testenv.StartRabbitMQ(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	db := testenv.NewDB(t)
	env := append(r.CommandEnv(), "PATH="+bin+string(os.PathListSeparator)+"/usr/lib/rabbitmq/bin"+string(os.PathListSeparator)+os.Getenv("PATH"),
		"DATABASE_URL="+db.URL, "RELAY_METRICS_ADDR=127.0.0.1:0")

	block := docBlock(t, "sinks.md", "## RabbitMQ streams", "sh")
	at := strings.Index(block, "RELAY_SINK_URL=")
	if at < 0 || !strings.Contains(block, "127.0.0.1:5552") {
		t.Fatalf("the quick start has no RELAY_SINK_URL with 127.0.0.1:5552:\n%s", block)
	}
	streamPort := r.StreamURI[strings.LastIndex(r.StreamURI, ":")+1 : len(r.StreamURI)-1]
	setup, run := block[:at], strings.ReplaceAll(block[at:], "127.0.0.1:5552", "127.0.0.1:"+streamPort)
	runScript(t, setup, root, env)

	cmd := exec.Command("sh", "-ec", run)
	cmd.Dir, cmd.Env = root, env
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			_ = cmd.Wait()
		}
	}
	defer stop()
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, business_key, payload)
		VALUES (gen_random_uuid(), 'payment', 'p-1', 'payment.completed', 'pay-1', '{"amount": 100}')`); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 60*time.Second, "the row in outbox.payment", func() (bool, error) {
		for _, m := range r.ReadStream(t, "outbox.payment") {
			if m.ApplicationProperties["business-key"] == "pay-1" {
				return true, nil
			}
		}
		return false, nil
	})
	stop()
	// The dead-letter streams were declared as streams too.
	senv := r.Environment(t)
	for _, s := range []string{"inbox.dlq", "outbox.dlq"} {
		if ok, err := senv.StreamExists(s); err != nil || !ok {
			t.Fatalf("stream %s: exists %v, %v", s, ok, err)
		}
	}
	if strings.Contains(out.String(), "secret") {
		t.Fatalf("the relay printed the password:\n%s", out.String())
	}
}
