package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// The drain comparison docs/benchmarks.md gives for the franz-go move runs
// as written, with the relay of this tree as both NEW and OLD and a backlog
// small enough for CI (-n 2000 for 300000): relaybench -rounds drains each
// build in the order ABBA ABBA, each on a slot of its own, and prints both
// builds' medians and their ratio. The figures mean nothing at that size;
// the command, the order and the report are what is checked.
func TestBenchmarkDocDrainRounds(t *testing.T) {
	bin := buildBenchBinaries(t)
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

// The peer latency command of docs/benchmarks.md runs as written, with a
// runner of the documented contract (the relay of this tree, set up on the
// slot it is given, stands in for the peer), shorter and slower: each side
// runs on a slot of its own in the order ABBA and the report gives both
// sides' median p99 per rate. The figures mean nothing here.
func TestBenchmarkDocPeerLatency(t *testing.T) {
	t.Parallel()
	bin := buildBenchBinaries(t)
	var line string
	for l := range strings.SplitSeq(docBlock(t, "benchmarks.md", "## A peer beside the relay, latency", "sh"), "\n") {
		if strings.Contains(l, "-peer-bin ") {
			line = l
		}
	}
	for _, want := range []string{"-latency 1000,5000", "-duration 20s", "-rounds 5", "-peer-bin ./peer-runner"} {
		if !strings.Contains(line, want) {
			t.Fatalf("the command %q no longer says %s: update this test", line, want)
		}
	}
	runner := filepath.Join(t.TempDir(), "peer-runner")
	script := `#!/bin/sh
set -e
` + bin + `/relay setup --database-url "$PGOUTBOX_PEER_DATABASE_URL" --slot "$PGOUTBOX_PEER_SLOT" --publication "$PGOUTBOX_PEER_PUBLICATION" --table "$PGOUTBOX_PEER_TABLE" >/dev/null
exec ` + bin + `/relay run --database-url "$PGOUTBOX_PEER_DATABASE_URL" --brokers "$PGOUTBOX_PEER_BROKERS" --slot "$PGOUTBOX_PEER_SLOT" --publication "$PGOUTBOX_PEER_PUBLICATION" --table "$PGOUTBOX_PEER_TABLE" --metrics-addr "" --log-level warn
`
	if err := os.WriteFile(runner, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	line = strings.NewReplacer("go run ./test/bench/relaybench", filepath.Join(bin, "relaybench"), "-latency 1000,5000", "-latency 100",
		"-duration 20s", "-duration 2s", "-rounds 5", "-rounds 2", "./peer-runner", runner).Replace(line)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := runScript(t, line, root, os.Environ())
	var order []string
	for _, m := range regexp.MustCompile(`(?m)^(relay|peer) \((relay|peer-runner)\):$`).FindAllStringSubmatch(out, -1) {
		order = append(order, m[1])
	}
	if got, want := strings.Join(order, " "), "relay peer peer relay"; got != want {
		t.Errorf("runs in the order %q, want %q (ABBA)\n%s", got, want, out)
	}
	if !regexp.MustCompile(`(?m)^100 +\S+ms \(\S+\) of 2 +\S+ms \(\S+\) of 2 +\S+$`).MatchString(out) {
		t.Errorf("no line of both sides' median p99 at 100/s over 2 runs each:\n%s", out)
	}
}

// make bench-debezium runs as docs/benchmarks.md gives it, on a backlog
// small enough for CI: one drain through Debezium's embedded engine and one
// through the relay on Apache Kafka, each reported, then the medians and
// the ratios. The figures mean nothing at that size.
func TestBenchmarkDocDebezium(t *testing.T) {
	if !testenv.RealKafka() {
		t.Skipf("runs Debezium's Kafka client against a real broker: %s=kafka", testenv.KafkaModeEnv)
	}
	t.Parallel()
	if !strings.Contains(docBlock(t, "benchmarks.md", "## Running them", "sh"), "make bench-debezium ") {
		t.Fatal("docs/benchmarks.md's Running them no longer shows make bench-debezium: update this test")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := runScript(t, `make --no-print-directory bench-debezium N=2000 BENCHFLAGS="-rounds 1"`, root, os.Environ())
	for _, re := range []string{
		`(?m)^relay +2000 rows in Kafka after `,
		`(?m)^debezium 2000 rows in Kafka after `,
		`(?m)^relay +medians of 1 drains: `,
		`(?m)^debezium medians of 1 drains: `,
		`(?m)^relay/debezium: drain rate `,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("make bench-debezium printed no line matching %s:\n%s", re, out)
		}
	}
}

// The sinks commands of docs/benchmarks.md run as written, smaller and
// shorter (-n 2000 for 500000, -duration 3s for 20s, -rounds 1 for 3):
// one backlog drained through the Kafka, NATS and RabbitMQ sinks, then
// commit → receipt through each, and the ratios to the Kafka sink; with a
// real broker in the tests (the real-Kafka pass), instead, the drain with
// the Kafka sink's records in Apache Kafka (-sinks-kafka apache). The figures
// mean nothing at that size; the commands and the report are what is
// checked.
func TestBenchmarkDocSinks(t *testing.T) {
	t.Parallel()
	if _, err := testenv.RabbitMQInstalled(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	bin := buildBenchBinaries(t)
	lines := docCommands(t, "## The NATS and RabbitMQ sinks beside Kafka's", "-sinks kafka,nats,rabbitmq")
	if len(lines) != 3 || !strings.Contains(lines[0], "-n 500000 -rounds 3") || !strings.Contains(lines[1], "-latency 1000 -conns 1 -duration 20s -rounds 3") ||
		!strings.Contains(lines[2], "-sinks-kafka apache -n 500000 -rounds 3") {
		t.Fatalf("the sinks commands %q changed: update this test", lines)
	}
	drain := []string{"kafka    2000 rows in kafka", "nats     2000 rows in nats", "rabbitmq 2000 rows in rabbitmq", "nats/kafka: drain rate", "rabbitmq/kafka: drain rate", "rabbitmq beside the relay (medians): walsender"}
	type run struct {
		line int      // of lines
		want []string // in its output
	}
	runs := []run{{0, drain}, {1, []string{"nats/kafka ", "rabbitmq/kafka "}}}
	if testenv.RealKafka() {
		// The real-Kafka pass runs the Apache Kafka drain only: the
		// others ran in the kfake pass.
		runs = []run{{2, append([]string{"starting Apache Kafka..."}, drain...)}}
	}
	small := strings.NewReplacer("go run ./test/bench/relaybench", "relaybench -relay-bin "+filepath.Join(bin, "relay"),
		"-n 500000", "-n 2000", "-duration 20s", "-duration 3s", "-rounds 3", "-rounds 1")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, r := range runs {
		out := runScript(t, small.Replace(lines[r.line]), root, env)
		for _, w := range r.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s printed no %q\n%s", lines[r.line], w, out)
			}
		}
	}
}

// The commands of docs/benchmarks.md that measure what the NATS and
// RabbitMQ brokers take alone run as written, two batches or writes
// instead of hundreds (-benchtime 2x): each prints messages a second, the
// NATS one for 1, 2 and 4 batches in flight.
func TestBenchmarkDocBrokersAlone(t *testing.T) {
	t.Parallel()
	if _, err := testenv.RabbitMQInstalled(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	lines := docCommands(t, "**What the brokers take alone.**", "go test -run XXX -bench ")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "./internal/publish/natspub") || !strings.HasSuffix(lines[1], "./internal/publish/rabbitmqpub") {
		t.Fatalf("the commands %q changed: update this test", lines)
	}
	want := [][]string{
		{"StreamAtomicBatches/depth=1", "StreamAtomicBatches/depth=2", "StreamAtomicBatches/depth=4", "msgs/s"},
		{"BenchmarkWrite", "msgs/s"},
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	short := regexp.MustCompile(`-benchtime \d+x`)
	for i, l := range lines {
		cmd := short.ReplaceAllString(l, "-benchtime 2x")
		if cmd == l {
			t.Fatalf("%s sets no -benchtime: update this test", l)
		}
		out := runScript(t, cmd, root, os.Environ())
		for _, w := range want[i] {
			if !strings.Contains(out, w) {
				t.Errorf("%s printed no %q\n%s", cmd, w, out)
			}
		}
	}
}

// The Debezium Server commands of docs/benchmarks.md run as written, on a
// backlog small enough for CI (-n 2000 for 200000, -rounds 1 for 2): one
// drain through Debezium Server's sink and one through the relay's, into
// the same NATS or RabbitMQ stream, each reported, then the medians and
// the ratios. The figures mean nothing at that size. It runs in the
// real-Kafka pass, with the other JVMs (the distribution is fetched with
// Maven once).
func TestBenchmarkDocDebeziumServer(t *testing.T) {
	if !testenv.RealKafka() {
		t.Skipf("runs Debezium Server's JVM, in the pass that runs the JVMs: %s=kafka", testenv.KafkaModeEnv)
	}
	t.Parallel()
	if _, err := testenv.RabbitMQInstalled(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	if _, err := testenv.DebeziumServerJava(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	bin := buildBenchBinaries(t)
	lines := docCommands(t, "### Debezium Server's NATS and RabbitMQ sinks", "-debezium-sink ")
	if len(lines) != 2 || !strings.Contains(lines[0], "-debezium-sink nats -nats-atomic -n 200000 -rounds 2") ||
		!strings.Contains(lines[1], "-debezium-sink rabbitmq -n 200000 -rounds 2") {
		t.Fatalf("the Debezium Server commands %q changed: update this test", lines)
	}
	small := strings.NewReplacer("go run ./test/bench/relaybench", "relaybench -relay-bin "+filepath.Join(bin, "relay"),
		"-n 200000", "-n 2000", "-rounds 2", "-rounds 1")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, line := range lines {
		sink := "nats"
		if strings.Contains(line, "rabbitmq") {
			sink = "rabbitmq"
		}
		out := runScript(t, small.Replace(line), root, env)
		for _, re := range []string{
			`(?m)^relay +2000 rows in ` + sink + ` after `,
			// Into RabbitMQ, Debezium's heartbeats are records too.
			`(?m)^debezium 20\d\d rows in ` + sink + ` after `,
			`(?m)^relay +medians of 1 drains: `,
			`(?m)^debezium medians of 1 drains: `,
			`(?m)^relay/debezium: drain rate `,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("%s printed no line matching %s:\n%s", line, re, out)
			}
		}
	}
}

// docCommands are the commands of the sh block under heading in
// docs/benchmarks.md that hold marker, their comments cut.
func docCommands(t *testing.T, heading, marker string) []string {
	t.Helper()
	var lines []string
	for l := range strings.SplitSeq(docBlock(t, "benchmarks.md", heading, "sh"), "\n") {
		if strings.Contains(l, marker) {
			l, _, _ = strings.Cut(l, "#")
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	return lines
}
