package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The drain comparison docs/benchmarks.md gives for the franz-go move runs
// as written, with the relay of this tree as both NEW and OLD and a backlog
// small enough for CI (-n 2000 for 300000): relaybench -rounds drains each
// build in the order ABBA ABBA, each on a slot of its own, and prints both
// builds' medians and their ratio. The figures mean nothing at that size;
// the command, the order and the report are what is checked.
func TestBenchmarkDocDrainRounds(t *testing.T) {
	bin := buildBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin+"/", "github.com/pgoutbox/pgoutbox/test/bench/relaybench").CombinedOutput(); err != nil {
		t.Fatalf("go build relaybench: %v\n%s", err, out)
	}
	var line string
	for l := range strings.SplitSeq(docBlock(t, "benchmarks.md", "### The Kafka client on franz-go", "sh"), "\n") {
		if strings.HasPrefix(l, "relaybench ") && strings.Contains(l, " -rounds ") {
			line = l
			break
		}
	}
	if line == "" {
		t.Fatal("docs/benchmarks.md shows no relaybench -rounds command")
	}
	line, _, _ = strings.Cut(line, "#")
	if !strings.Contains(line, "-n 300000") {
		t.Fatalf("the command %q no longer says -n 300000: update this test", line)
	}
	relay := filepath.Join(bin, "relay")
	line = strings.NewReplacer("-n 300000", "-n 2000", " NEW", " "+relay, " OLD", " "+relay).Replace(line)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out := runScript(t, line, root, env)

	var order []string
	for _, m := range regexp.MustCompile(`(?m)^(relay|compare) \(relay\) -> kfake drain: 2000 events`).FindAllStringSubmatch(out, -1) {
		order = append(order, m[1])
	}
	if got, want := strings.Join(order, " "), "relay compare compare relay relay compare compare relay"; got != want {
		t.Errorf("drains in the order %q, want %q (ABBA ABBA)\n%s", got, want, out)
	}
	for _, want := range []string{"relay medians of 4 drains: ", "compare medians of 4 drains: ", "relay/compare: drain rate "} {
		if !strings.Contains(out, want) {
			t.Errorf("relaybench printed no %q\n%s", want, out)
		}
	}
}
