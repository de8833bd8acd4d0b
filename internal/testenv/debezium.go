package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// DebeziumOutboxDDL creates the outbox table of Debezium's Outbox Event
// Router (its documented layout, as a Debezium user has it): the table the
// migration tests and the Debezium benchmark start from.
const DebeziumOutboxDDL = `CREATE TABLE outboxevent (
	id                 uuid                   NOT NULL PRIMARY KEY,
	aggregatetype      character varying(255) NOT NULL,
	aggregateid        character varying(255) NOT NULL,
	type               character varying(255) NOT NULL,
	payload            jsonb,
	timestamp          timestamptz            NOT NULL DEFAULT now(),
	tracingspancontext character varying(256))`

// Debezium is a running test/debezium/DebeziumOutbox.java: Debezium's
// embedded engine with the Postgres connector and the Outbox Event Router,
// writing each routed record to Kafka as Kafka Connect would.
type Debezium struct {
	// Out is what the program printed (STARTED, PUBLISHED n, STOPPED) and
	// its log.
	Out *SyncBuffer

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// DebeziumTestJVM are the JVM flags of StartDebezium: a small heap and
// the C1 compiler only, which start fastest (a test's engine runs seconds).
// A benchmark gives its own (the default JIT).
var DebeziumTestJVM = []string{"-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}

// StartDebezium runs DebeziumOutbox with the engine configuration props
// (connector, slot, publication, offsets, transforms), writing to brokers,
// and waits until its connector task started. The Debezium version is
// pinned in test/debezium/pom.xml, fetched with Maven once as for the
// Kafka broker. The program is killed when t ends unless Stop ended it.
func StartDebezium(t testing.TB, props map[string]string, brokers []string) *Debezium {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d, err := RunDebezium(ctx, props, brokers, t.TempDir(), DebeziumTestJVM...)
	if err != nil {
		t.Fatalf("debezium: %v", err)
	}
	t.Cleanup(d.Kill)
	return d
}

// RunDebezium is StartDebezium for a program of its own (a benchmark):
// the JVM runs with jvmArgs, its engine configuration is written to dir,
// and the caller ends it with Stop or Kill. It returns once the connector
// task started, or with an error that carries what the program printed.
func RunDebezium(ctx context.Context, props map[string]string, brokers []string, dir string, jvmArgs ...string) (*Debezium, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("java not found on PATH: install a JDK 17 or newer (Debian: default-jdk-headless)")
	}
	libs, err := mavenLibs(ctx, "debezium", "debezium.version")
	if err != nil {
		return nil, err
	}
	pom, err := modulePOM("debezium")
	if err != nil {
		return nil, err
	}
	confPath := filepath.Join(dir, "engine.properties")
	if err := writeProperties(confPath, props); err != nil {
		return nil, err
	}
	d := &Debezium{Out: &SyncBuffer{}, done: make(chan struct{})}
	args := append(append([]string{}, jvmArgs...), "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", filepath.Join(libs, "*"),
		filepath.Join(filepath.Dir(pom), "DebeziumOutbox.java"), confPath, strings.Join(brokers, ","))
	d.cmd = exec.Command(java, args...)
	d.cmd.Stdout, d.cmd.Stderr = d.Out, d.Out
	d.cmd.SysProcAttr = kafkaProcAttr()
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(d.Out.String(), "STARTED") {
		select {
		case <-d.done:
			return nil, fmt.Errorf("DebeziumOutbox exited: %v\n%s", d.err, d.Out.String())
		case <-ctx.Done():
			d.Kill()
			return nil, fmt.Errorf("the Debezium connector task did not start: %w\n%s", ctx.Err(), d.Out.String())
		case <-tick.C:
		}
	}
	return d, nil
}

// writeProperties writes props to path as a Java properties file, the
// keys sorted; only the owner may read it (it holds the database's
// password).
func writeProperties(path string, props map[string]string) error {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var conf strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&conf, "%s=%s\n", k, strings.ReplaceAll(props[k], `\`, `\\`))
	}
	return os.WriteFile(path, []byte(conf.String()), 0o600)
}

// PID is the JVM's process ID.
func (d *Debezium) PID() int { return d.cmd.Process.Pid }

// Kill kills the JVM (and its process group) and waits for it to exit.
func (d *Debezium) Kill() {
	killGroup(d.cmd.Process, d.done)
	<-d.done
}

// Stop ends the engine gracefully (SIGTERM: it commits its offsets, and
// so the slot's confirmed position, then exits) and fails t when it does
// not exit within a minute.
func (d *Debezium) Stop(t testing.TB) {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(time.Minute):
		t.Fatalf("DebeziumOutbox did not stop within a minute:\n%s", d.Out.String())
	}
	if !strings.Contains(d.Out.String(), "STOPPED") {
		t.Fatalf("DebeziumOutbox exited (%v) without stopping in order:\n%s", d.err, d.Out.String())
	}
}
