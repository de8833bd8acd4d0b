package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

var fakeAPIOn = regexp.MustCompile(`fake payment API on http://(\S+)`)

// README.md's lines work as written, on other ports: the go run line's
// flags start the consumer, and its curl line lists the fake API's
// charges (none yet).
func TestReadme(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	kafka := testenv.NewBroker(t) // the only test of this binary using the default topic and group
	lines := testenv.ShBlock(t, "README.md", "", map[string]string{"DATABASE_URL": db.URL, "KAFKA_BROKERS": kafka.Brokers[0]})
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "go run ./examples/payment-consumer ") || !strings.HasPrefix(lines[1], "curl ") {
		t.Fatalf("README.md's sh block: %q, want go run ./examples/payment-consumer and curl", lines)
	}
	args := strings.Fields(strings.TrimPrefix(lines[0], "go run ./examples/payment-consumer "))
	for i, a := range args {
		if strings.HasPrefix(a, "127.0.0.1:") {
			args[i] = "127.0.0.1:0"
		}
	}
	addr, stderr := testenv.RunMain(t, run, args, fakeAPIOn)
	curl := strings.Replace(strings.Replace(lines[1], "localhost:8091", addr, 1), "curl ", "curl -f ", 1)
	out, err := exec.Command("sh", "-c", curl).Output()
	if err != nil || !strings.HasPrefix(strings.TrimSpace(string(out)), "[") && !strings.HasPrefix(strings.TrimSpace(string(out)), "{") {
		t.Fatalf("%s: %v, answered %q\n%s", curl, err, out, stderr.String())
	}
}
