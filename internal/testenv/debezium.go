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

// StartDebezium runs DebeziumOutbox with the engine configuration props
// (connector, slot, publication, offsets, transforms), writing to brokers,
// and waits until its connector task started. The Debezium version is
// pinned in test/debezium/pom.xml, fetched with Maven once as for the
// Kafka broker. The program is killed when t ends unless Stop ended it.
func StartDebezium(t testing.TB, props map[string]string, brokers []string) *Debezium {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatalf("debezium: java not found on PATH: install a JDK 17 or newer (Debian: default-jdk-headless)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	libs, err := mavenLibs(ctx, "debezium", "debezium.version")
	if err != nil {
		t.Fatalf("debezium: %v", err)
	}
	pom, err := modulePOM("debezium")
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var conf strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&conf, "%s=%s\n", k, strings.ReplaceAll(props[k], `\`, `\\`))
	}
	confPath := filepath.Join(t.TempDir(), "engine.properties")
	if err := os.WriteFile(confPath, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &Debezium{Out: &SyncBuffer{}, done: make(chan struct{})}
	d.cmd = exec.Command(java, "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", filepath.Join(libs, "*"),
		filepath.Join(filepath.Dir(pom), "DebeziumOutbox.java"), confPath, strings.Join(brokers, ","))
	d.cmd.Stdout, d.cmd.Stderr = d.Out, d.Out
	d.cmd.SysProcAttr = kafkaProcAttr()
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("debezium: %v", err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		killGroup(d.cmd.Process)
		<-d.done
	})
	WaitFor(t, 3*time.Minute, "the Debezium connector task", func() (bool, error) {
		select {
		case <-d.done:
			return false, fmt.Errorf("DebeziumOutbox exited: %v\n%s", d.err, d.Out.String())
		default:
		}
		return strings.Contains(d.Out.String(), "STARTED"), nil
	})
	return d
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
