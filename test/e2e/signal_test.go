package e2e

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// `timeout N relay run …` stops the relay gracefully: GNU timeout signals
// the relay and then its whole process group, so the relay gets SIGTERM
// twice, which is one stop, not the "second signal" hard exit. The test
// sends timeout the SIGTERM it would send itself when N runs out (it
// forwards it the same way), once the relay has published a row. Whether
// the kernel merges the two signals is a race, so the test then does what
// timeout does by hand, in order: SIGTERM to the relay, and once the relay
// has said it is stopping, SIGTERM to its process group.
func TestTimeoutStopsGracefully(t *testing.T) {
	t.Parallel()
	timeoutBin, err := exec.LookPath("timeout")
	if err != nil {
		t.Skip("GNU timeout is not installed")
	}
	bin := buildRelay(t)
	db := testenv.NewDB(t)
	k := testenv.NewKafka(t)
	common := []string{"--database-url", db.URL, "--slot", db.Name, "--publication", "pub_" + db.Name}
	mustRunRelay(t, bin, append([]string{"setup"}, common...)...)
	logPath := relayLog(t)
	p := startRelay(t, timeoutBin, logPath, append([]string{"600", bin, "run", "--brokers", k.Brokers[0], "--metrics-addr", "127.0.0.1:0"}, common...)...)

	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, business_key, payload)
		VALUES ('order', 'o-1', 'order.placed', 'timeout-1', '{}')`); err != nil {
		t.Fatal(err)
	}
	testenv.WaitForRecords(t, k.Brokers, "outbox.order", 1, 2*time.Minute)
	// timeout's SIGTERM handler is the one its timer runs: the signal to
	// the relay, then to the process group.
	code := p.stop(time.Minute)
	wantStopped(t, "timeout relay run", code, logTail(logPath))

	// By hand, in a process group of its own.
	var out testenv.SyncBuffer
	cmd := exec.Command(bin, append([]string{"run", "--brokers", k.Brokers[0], "--metrics-addr", "127.0.0.1:0"}, common...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	testenv.WaitFor(t, 2*time.Minute, "relay run streaming", func() (bool, error) {
		return strings.Contains(out.String(), "streaming"), nil
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "the stop announced", func() (bool, error) {
		return strings.Contains(out.String(), "stopping gracefully"), nil
	})
	// A second SIGTERM, to the group, unless the relay is gone already:
	// a reaped leader's group ID may be another process's by now (IDs
	// wrap at pid_max), and the signal would stop another test's broker.
	select {
	case err = <-done:
	default:
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			t.Fatalf("relay run still running a minute after SIGTERM:\n%s", out.String())
		}
	}
	code = 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	wantStopped(t, "relay run, SIGTERM to it and its group", code, out.String())
}

// wantStopped fails t unless the relay exited 0 with "relay stopped" and
// no hard exit.
func wantStopped(t *testing.T, what string, code int, out string) {
	t.Helper()
	if code != 0 || !strings.Contains(out, "relay stopped") || strings.Contains(out, "second signal") {
		t.Fatalf("%s: exit %d, want 0 with \"relay stopped\" and no hard exit:\n%s", what, code, out)
	}
}
