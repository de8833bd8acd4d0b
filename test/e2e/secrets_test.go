package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// The relay reads its database URL and SASL password from *_FILE
// variables; neither appears on its command line (/proc/PID/cmdline), and a
// wrong password read from the file is what the broker refuses.
func TestSecretsFromFiles(t *testing.T) {
	t.Parallel()
	const saslPass = "Kafka-Secret-Pw-42"
	db := testenv.NewDB(t)
	kafka := testenv.NewKafka(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "relay", saslPass))
	bin := buildRelay(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The test server trusts any password; this one is only to be hidden.
	url := strings.Replace(db.URL, "postgres@", "postgres:Db-Secret-Pw-42@", 1)
	if url == db.URL {
		t.Fatalf("test URL %q has no postgres@ user part", db.URL)
	}
	urlFile := write("database-url", url)
	mustRunRelay(t, bin, "setup", "--database-url", db.URL, "--slot", db.Name, "--publication", "pub_"+db.Name)
	args := []string{"run", "--slot", db.Name, "--publication", "pub_" + db.Name, "--brokers", kafka.Brokers[0],
		"--kafka-sasl-mechanism", "plain", "--kafka-sasl-username", "relay", "--kafka-allow-insecure-sasl",
		"--metrics-addr", ""}
	start := func(passFile string) (*exec.Cmd, *testenv.SyncBuffer, chan error) {
		var out testenv.SyncBuffer
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "RELAY_DATABASE_URL_FILE="+urlFile, "RELAY_KAFKA_SASL_PASSWORD_FILE="+passFile)
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		return cmd, &out, done
	}

	// A wrong password from the file: the broker refuses it (kfake
	// closes the connection, so the relay reports the broker unreachable).
	_, out, done := start(write("wrong", "not-the-password"))
	select {
	case err := <-done:
		if code := exitCode(err); code != 1 || !strings.Contains(out.String(), "kafka") {
			t.Fatalf("relay with a wrong SASL password file: exit %d, want 1 naming kafka:\n%s", code, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("relay with a wrong SASL password did not exit:\n%s", out.String())
	}

	// The right one: the relay streams; its command line holds neither secret.
	cmd, out, done := start(write("sasl-password", saslPass))
	testenv.WaitFor(t, time.Minute, "the relay to stream", func() (bool, error) {
		select {
		case err := <-done:
			t.Fatalf("relay exited (%v):\n%s", err, out.String())
		default:
		}
		return strings.Contains(out.String(), "streaming"), nil
	})
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{saslPass, "Db-Secret-Pw-42"} {
		if strings.Contains(string(cmdline), secret) {
			t.Errorf("/proc/PID/cmdline holds a secret: %q", cmdline)
		}
		if strings.Contains(out.String(), secret) {
			t.Errorf("relay output holds a secret:\n%s", out.String())
		}
	}
	if strings.Contains(out.String(), "command line") {
		t.Errorf("relay warned about a secret on the command line although none was:\n%s", out.String())
	}
}

// A secret given as a flag works, with a warning that names the flag and
// the safer variables.
func TestSecretOnCommandLineWarns(t *testing.T) {
	t.Parallel()
	bin := buildRelay(t)
	code, out := runRelay(t, bin, "status", "--database-url", "postgres://u:Pw-On-Cmdline@127.0.0.1:1/db?sslmode=disable&connect_timeout=2")
	if code != 1 || !strings.Contains(out, "--database-url") || !strings.Contains(out, "RELAY_DATABASE_URL_FILE") || strings.Contains(out, "Pw-On-Cmdline") {
		t.Fatalf("relay status with the URL as a flag: exit %d, want 1 with a warning naming RELAY_DATABASE_URL_FILE and no password:\n%s", code, out)
	}
}

// exitCode is the exit code of a process Wait returned err for.
func exitCode(err error) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	return -1
}
