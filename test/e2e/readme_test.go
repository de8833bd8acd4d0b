package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// readmeCommands returns the lines of README.md's sh code blocks that run
// relay or inbox, in document order.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	inSh := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "```"):
			inSh = !inSh && (l == "```sh" || l == "```bash")
		case inSh && (strings.HasPrefix(l, "relay ") || strings.HasPrefix(l, "inbox ")):
			lines = append(lines, l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// buildBinaries builds cmd/relay and cmd/inbox into one directory.
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", "github.com/pgoutbox/pgoutbox/cmd/relay", "github.com/pgoutbox/pgoutbox/cmd/inbox")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// Every relay and inbox command line of the README runs as written (through
// sh, with the binaries on PATH and $DATABASE_URL and $KAFKA_BROKERS set)
// and exits 0, so the documentation cannot drift from the CLIs. The long
// running ones (relay run, inbox tail) are stopped with SIGINT once they did
// their work: the relay published a row inserted with plain SQL, tail
// printed its outcome.
func TestReadmeCommandLines(t *testing.T) {
	lines := readmeCommands(t)
	covered := map[string]bool{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) > 1 {
			covered[f[0]+" "+f[1]] = true
		}
	}
	for _, want := range []string{"relay setup", "relay run", "relay status", "relay teardown", "relay recover", "relay backfill", "relay verify", "relay dev",
		"inbox migrate", "inbox status", "inbox list", "inbox revive", "inbox purge", "inbox tail"} {
		if !covered[want] {
			t.Errorf("README shows no %s command line", want)
		}
	}

	bin := buildBinaries(t)
	db := testenv.NewDB(t)
	k := testenv.NewKafka(t, kfake.SeedTopics(1, "outbox.order"))
	env := append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"DATABASE_URL="+db.URL,
		"KAFKA_BROKERS="+strings.Join(k.Brokers, ","),
		"RELAY_METRICS_ADDR=127.0.0.1:0", // the default :9740 may be taken on a test machine
	)
	ctx := context.Background()
	// The relay started by a "relay run" line keeps running through the
	// "relay status" lines after it (status exits 1 while no relay streams
	// the slot), and is stopped with SIGINT before any other line.
	var relayRun func()
	stopRelay := func() {
		if relayRun != nil {
			relayRun()
			relayRun = nil
		}
	}
	defer stopRelay()
	for i, line := range lines {
		t.Logf("README: %s", line)
		if !strings.HasPrefix(line, "relay status ") {
			stopRelay()
		}
		cmd := exec.Command("sh", "-c", "exec "+line)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		var out testenv.SyncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		var ready func() (bool, error)
		switch {
		case strings.HasPrefix(line, "relay run "):
			// A row written by a non-Go producer: plain SQL, the id from
			// the column default.
			if _, err := db.Pool.Exec(ctx, `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, business_key, payload)
				VALUES ('order', 'o-`+strconv.Itoa(i)+`', 'order.placed', 'readme-`+strconv.Itoa(i)+`', '{"readme":true}')`); err != nil {
				t.Fatal(err)
			}
			ready = func() (bool, error) {
				recs, err := testenv.ReadTopic(ctx, k.Brokers, "outbox.order")
				return len(recs) > 0, err
			}
		case strings.HasPrefix(line, "inbox tail "):
			ready = func() (bool, error) { return strings.Contains(out.String(), " processed"), nil }
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		end := func() {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%s: %v\n%s", line, err, out.String())
				}
			case <-time.After(3 * time.Minute):
				_ = cmd.Process.Kill()
				t.Fatalf("%s did not end:\n%s", line, out.String())
			}
		}
		if ready == nil {
			end()
			continue
		}
		testenv.WaitFor(t, 2*time.Minute, line, func() (bool, error) {
			select {
			case err := <-done:
				t.Fatalf("%s ended early (%v):\n%s", line, err, out.String())
			default:
			}
			return ready()
		})
		stop := func() {
			_ = cmd.Process.Signal(syscall.SIGINT)
			end()
		}
		if strings.HasPrefix(line, "relay run ") {
			relayRun = stop
			continue
		}
		stop()
	}
}

// The README's install lines name packages that exist.
func TestReadmeInstallLines(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`go (?:install|get) github\.com/pgoutbox/pgoutbox/(\S+?)(?:@\S+)?(?:\s|$)`)
	found := 0
	for _, m := range re.FindAllSubmatch(b, -1) {
		found++
		dir := filepath.Join("../..", string(m[1]))
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			t.Errorf("README installs %s, which is not a package directory", m[1])
		}
	}
	if found == 0 || !bytes.Contains(b, []byte("go install github.com/pgoutbox/pgoutbox/cmd/relay@latest")) {
		t.Errorf("README has no go install line for the relay")
	}
}

// The README's quick start program compiles against this module as written.
func TestReadmeQuickStartCompiles(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "## Quick start")
	if i < 0 {
		t.Fatal("README has no Quick start section")
	}
	start := strings.Index(s[i:], "```go\n")
	if start < 0 {
		t.Fatal("README's Quick start has no Go program")
	}
	code := s[i+start+len("```go\n"):]
	code = code[:strings.Index(code, "```")]
	if !strings.Contains(code, "package main") || !strings.Contains(code, `os.Getenv("DATABASE_URL")`) {
		t.Fatalf("quick start is not a complete program:\n%s", code)
	}
	// A directory inside the module (so it builds against this checkout);
	// the leading dot keeps it out of ./... patterns.
	dir, err := os.MkdirTemp("../..", ".quickstart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "vet", "./"+filepath.Base(dir))
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README quick start does not compile: %v\n%s", err, out)
	}
}
