package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pgoutbox/pgoutbox"
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

// The README's Install block works as written in this checkout (the clone
// it starts with needs the network; docker build an engine): make install
// installs relay and inbox, whose --version names the source tree's VERSION
// (the last release, v0.1.0) and not a pseudo-version; make release builds
// the binaries named with the version make version prints. Go packages
// named in it exist.
func TestReadmeInstall(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`github\.com/pgoutbox/pgoutbox/((?:cmd|pkg)/[a-z]+)`).FindAllStringSubmatch(string(b), -1) {
		if st, err := os.Stat(filepath.Join("../..", m[1])); err != nil || !st.IsDir() {
			t.Errorf("README names %s, which is not a package directory", m[1])
		}
	}
	root := moduleRoot(t)
	gobin := t.TempDir()
	dist := t.TempDir()
	env := append(os.Environ(), "GOBIN="+gobin, "PATH="+gobin+string(os.PathListSeparator)+os.Getenv("PATH"))
	var ran []string
	for _, line := range testenv.ShBlock(t, "../../README.md", "## Install\n", nil) {
		switch {
		case strings.HasPrefix(line, "git clone ") || strings.HasPrefix(line, "docker build "):
			continue
		case strings.HasPrefix(line, "make release"):
			line = strings.Replace(line, "linux/amd64", runtime.GOOS+"/"+runtime.GOARCH, 1) + " DIST=" + dist
		}
		out := runScript(t, line, root, env)
		ran = append(ran, line)
		if strings.HasPrefix(line, "relay --version") {
			if want := "relay " + pgoutbox.Version + " ("; !strings.HasPrefix(out, want) {
				t.Errorf("relay --version after make install printed %q, want it to start with %q", out, want)
			}
		}
	}
	if len(ran) != 3 {
		t.Fatalf("ran %q from README's Install block, want make install, relay --version and make release", ran)
	}
	version := strings.TrimSpace(runScript(t, "make -s version", root, env))
	for _, name := range []string{"relay", "inbox"} {
		bin := filepath.Join(dist, name+"-"+version+"-"+runtime.GOOS+"-"+runtime.GOARCH)
		out := runScript(t, bin+" --version", root, env)
		if want := name + " " + version + " ("; !strings.HasPrefix(out, want) {
			t.Errorf("%s --version printed %q, want it to start with %q", bin, out, want)
		}
	}
}

// The README's quick start program compiles against this module as written.
func TestReadmeQuickStartCompiles(t *testing.T) {
	_, code := readmeQuickStart(t)
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

// readmeQuickStart returns the Quick start's console lines (without the
// prompt and the trailing comment), its Go program and the replace line
// its note gives for the unpublished module.
func readmeQuickStart(t *testing.T) (lines []string, program string) {
	t.Helper()
	const readme, heading = "../../README.md", "## Quick start"
	comment := regexp.MustCompile(`\s+# .*$`)
	for _, l := range strings.Split(testenv.MarkdownBlock(t, readme, heading, "console"), "\n") {
		if l, ok := strings.CutPrefix(l, "$ "); ok {
			lines = append(lines, comment.ReplaceAllString(l, ""))
		}
	}
	return lines, testenv.MarkdownBlock(t, readme, heading, "go")
}

// startLine starts one command line through sh in dir, in a process group
// of its own (go run's child gets the interrupt too), and returns its output
// and how to stop it with SIGINT (failing the test if it then fails).
func startLine(t *testing.T, line, dir string, env []string) (*testenv.SyncBuffer, func()) {
	t.Helper()
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out := &testenv.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		// The process may have ended on its own: its group, reaped, is
		// not signalled (its ID may be another process's by now, IDs
		// wrapping at pid_max, and the signal would stop another test's
		// broker or server).
		var err error
		select {
		case err = <-done:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				t.Errorf("%s did not stop on SIGINT:\n%s", line, out.String())
				return
			}
		}
		var exit *exec.ExitError
		interrupted := errors.As(err, &exit) && (exit.ExitCode() == 130 ||
			exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT)
		if err != nil && !interrupted {
			t.Errorf("%s: %v\n%s", line, err, out.String())
		}
	}
	t.Cleanup(stop)
	return out, stop
}

// The Quick start runs as written, terminal by terminal: the embedded
// broker alone, the relay, the program (in a new module next to a clone,
// with the block's replace line, as pasted), and kcat, which sees order 42. The
// program ships order 42 once; run again, it writes a second event for the
// order, which its consumer answers as a duplicate and does not ship;
// nothing else (no demo) is on outbox.order.
// Only the port (19092 may be taken) and the database URL differ.
func TestReadmeQuickStart(t *testing.T) {
	lines, program := readmeQuickStart(t)
	if len(lines) != 8 {
		t.Fatalf("Quick start has %d command lines, want 8 (broker, export, relay, module, replace, go run twice, kcat):\n%s", len(lines), strings.Join(lines, "\n"))
	}
	// On a real broker (PGOUTBOX_TEST_KAFKA=kafka) the broker's port
	// stands in for 19092 and terminal 1 stays idle. This test alone uses
	// the unprefixed outbox.order there (the others' topics are prefixed).
	var real *testenv.Kafka
	if testenv.RealKafka() {
		real = testenv.NewBroker(t)
	}
	var port string
	if real != nil {
		_, port, _ = net.SplitHostPort(real.Brokers[0])
	} else {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		_ = l.Close()
	}
	for i := range lines {
		lines[i] = strings.ReplaceAll(lines[i], "19092", port)
	}
	bin := buildBinaries(t)
	db := testenv.NewDB(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(root, filepath.Join(dir, "pgoutbox")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "RELAY_METRICS_ADDR=127.0.0.1:0")

	// 1: the broker.
	if !strings.HasPrefix(lines[0], "relay dev --broker-only ") {
		t.Fatalf("terminal 1 runs %q, want relay dev --broker-only", lines[0])
	}
	stopBroker := func() {}
	if real == nil {
		var brokerOut *testenv.SyncBuffer
		brokerOut, stopBroker = startLine(t, lines[0], dir, env)
		testenv.WaitFor(t, time.Minute, "the embedded broker", func() (bool, error) {
			return strings.Contains(brokerOut.String(), "127.0.0.1:"+port), nil
		})
	}
	// The export line, with the test's database.
	exports, ok := strings.CutPrefix(lines[1], "export ")
	if !ok {
		t.Fatalf("the second line is %q, want export", lines[1])
	}
	for _, kv := range strings.Fields(exports) {
		if strings.HasPrefix(kv, "DATABASE_URL=") {
			kv = "DATABASE_URL=" + db.URL
		}
		env = append(env, kv)
	}
	// 2: the relay.
	relayOut, stopRelay := startLine(t, lines[2], dir, env)
	// 3: the module, the program, its dependencies.
	run := func(line, dir string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	run(lines[3], dir)
	qs := filepath.Join(dir, "quickstart")
	if err := os.WriteFile(filepath.Join(qs, "main.go"), []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(lines[4], "go mod edit -replace github.com/pgoutbox/pgoutbox=../pgoutbox && ") {
		t.Fatalf("the fifth line is %q, want the replace line (the module is not published yet)", lines[4])
	}
	run(lines[4], qs)
	progOut, stopProg := startLine(t, lines[5], qs, env)
	testenv.WaitFor(t, 5*time.Minute, "the program to ship order 42", func() (bool, error) {
		if strings.Contains(relayOut.String(), "level=ERROR") {
			return false, fmt.Errorf("relay: %s", relayOut.String())
		}
		return strings.Contains(progOut.String(), "shipped order 42"), nil
	})
	stopProg()
	// Again: the producer writes a second event for order 42 (a retry
	// that committed twice), which the consumer answers as a duplicate.
	progOut2, stopProg2 := startLine(t, lines[6], qs, env)
	testenv.WaitFor(t, 5*time.Minute, "the second run to see the duplicate", func() (bool, error) {
		return strings.Contains(progOut2.String(), "order 42: duplicate of business key order-42-placed"), nil
	})
	stopProg2()
	if strings.Contains(progOut2.String(), "shipped order") {
		t.Errorf("the second run shipped again:\n%s", progOut2.String())
	}
	// 4: kcat.
	kcatOut, stopKcat := startLine(t, lines[7], dir, env)
	// kcat buffers the records it prints; its end-of-partition notes go to
	// stderr at once.
	testenv.WaitFor(t, time.Minute, "kcat to read order 42's two events", func() (bool, error) {
		return regexp.MustCompile(`end of topic outbox\.order \[\d\] at offset 2`).MatchString(kcatOut.String()), nil
	})
	recs, err := testenv.ReadTopic(context.Background(), []string{"127.0.0.1:" + port}, "outbox.order")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || string(recs[0].Key) != "42" || string(recs[1].Key) != "42" {
		t.Errorf("outbox.order holds %d records, want order 42's two events alone (no demo): %+v", len(recs), recs)
	}
	stopKcat()
	stopRelay()
	stopBroker()
	if !strings.Contains(kcatOut.String(), "42 message-id=") || !strings.Contains(kcatOut.String(), "business-key=order-42-placed") {
		t.Errorf("kcat did not print order 42 with its headers:\n%s", kcatOut.String())
	}
	if n := strings.Count(progOut.String(), "shipped order"); n != 1 {
		t.Errorf("the program shipped %d orders, want 1 (order 42):\n%s", n, progOut.String())
	}
}
