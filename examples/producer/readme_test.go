package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// README.md's lines work as written, on another port: the go run line's
// flags start the producer, and its curl line places an order, answered
// with the order and its ID.
func TestReadme(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	lines := testenv.ShBlock(t, "README.md", "", map[string]string{"DATABASE_URL": db.URL})
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "go run ./examples/producer ") || !strings.HasPrefix(lines[1], "curl ") {
		t.Fatalf("README.md's sh block: %q, want go run ./examples/producer and curl", lines)
	}
	args := strings.Fields(strings.TrimPrefix(lines[0], "go run ./examples/producer "))
	for i, a := range args {
		if a == ":8090" {
			args[i] = "127.0.0.1:0"
		}
	}
	addr, stderr := testenv.RunMain(t, run, args, listening)
	curl := strings.Replace(lines[1], "localhost:8090", addr, 1)
	out, err := exec.Command("sh", "-c", strings.Replace(curl, "curl ", "curl -f ", 1)).Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", curl, err, stderr.String())
	}
	var o Order
	if err := json.Unmarshal(out, &o); err != nil || o.ID == "" || o.Customer != "ada" || o.AmountCents != 1200 {
		t.Fatalf("%s answered %q (%v), want the order with its ID", curl, out, err)
	}
}
