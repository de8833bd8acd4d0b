package testenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Record is one Kafka record as kcat read it.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	// Key is nil for a null key.
	Key []byte
	// Value is nil for a null value.
	Value     []byte
	Headers   []Header
	Timestamp time.Time
}

// Header is one record header.
type Header struct {
	Key   string
	Value string
}

// Header returns the value of the first header named key.
func (r Record) Header(key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value, true
		}
	}
	return "", false
}

// kcatFormat prints lengths before the key and value so binary data parses
// exactly.
const kcatFormat = `%p %o %T %K %S\n%k%s\n`

// ReadTopic reads every record of topic from the beginning to the current end
// with kcat and returns them in partition, offset order within a partition.
func ReadTopic(ctx context.Context, brokers []string, topic string) ([]Record, error) {
	if _, err := exec.LookPath("kcat"); err != nil {
		return nil, errors.New("kcat not found; install it with: apt-get install -y kcat")
	}
	base := []string{"-C", "-b", strings.Join(brokers, ","), "-t", topic, "-o", "beginning", "-e", "-q",
		"-X", "topic.metadata.refresh.interval.ms=1000"}
	raw, err := runKcat(ctx, append(base, "-f", kcatFormat))
	if err != nil {
		return nil, err
	}
	recs, err := parseKcat(topic, raw)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, nil
	}
	// -f cannot print headers unambiguously; the JSON envelope can. It runs
	// second, so it sees a superset of the records above.
	js, err := runKcat(ctx, append(base, "-J"))
	if err != nil {
		return nil, err
	}
	headers, err := parseKcatHeaders(js)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		h, ok := headers[[2]int64{int64(recs[i].Partition), recs[i].Offset}]
		if !ok {
			return nil, fmt.Errorf("kcat: no headers read for %s/%d@%d", topic, recs[i].Partition, recs[i].Offset)
		}
		recs[i].Headers = h
	}
	return recs, nil
}

// MustReadTopic is ReadTopic that fails t on error.
func MustReadTopic(t testing.TB, brokers []string, topic string) []Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	recs, err := ReadTopic(ctx, brokers, topic)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// WaitForRecords reads topic with kcat until it holds at least n records or
// timeout passes, and returns what it read last.
func WaitForRecords(t testing.TB, brokers []string, topic string, n int, timeout time.Duration) []Record {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		recs, err := ReadTopic(ctx, brokers, topic)
		cancel()
		if err == nil && len(recs) >= n {
			return recs
		}
		last = err
		if time.Now().After(deadline) {
			t.Fatalf("kcat: %s holds %d records, want at least %d after %v (last error: %v)", topic, len(recs), n, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WaitForIDs reads topic with kcat until a record names each of ids in its
// message-id header (duplicates allowed) and returns the records; it fails
// t after timeout with the number missing.
func WaitForIDs(t testing.TB, brokers []string, topic string, ids []string, timeout time.Duration) []Record {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		recs := WaitForRecords(t, brokers, topic, len(ids), time.Until(deadline))
		n := MissingIDs(recs, ids)
		if n == 0 {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages missing from %s after %v", n, len(ids), topic, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// MissingIDs counts the ids that no record names in its message-id header.
func MissingIDs(recs []Record, ids []string) int {
	seen := make(map[string]bool, len(recs))
	for _, r := range recs {
		id, _ := r.Header("message-id")
		seen[id] = true
	}
	missing := 0
	for _, id := range ids {
		if !seen[id] {
			missing++
		}
	}
	return missing
}

func runKcat(ctx context.Context, args []string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "kcat", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kcat %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

func parseKcat(topic string, raw []byte) ([]Record, error) {
	var out []Record
	r := bufio.NewReader(bytes.NewReader(raw))
	for {
		line, err := r.ReadString('\n')
		if errors.Is(err, io.EOF) && line == "" {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("kcat output: %w", err)
		}
		f := strings.Fields(line)
		if len(f) != 5 {
			return nil, fmt.Errorf("kcat output: bad record line %q", line)
		}
		p, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		ts, err3 := strconv.ParseInt(f[2], 10, 64)
		kl, err4 := strconv.Atoi(f[3])
		vl, err5 := strconv.Atoi(f[4])
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return nil, fmt.Errorf("kcat output: bad record line %q: %w", line, err)
		}
		rec := Record{Topic: topic, Partition: int32(p), Offset: o, Timestamp: time.UnixMilli(ts)}
		if rec.Key, err = readN(r, kl); err != nil {
			return nil, err
		}
		if rec.Value, err = readN(r, vl); err != nil {
			return nil, err
		}
		if b, err := r.ReadByte(); err != nil || b != '\n' {
			return nil, fmt.Errorf("kcat output: record %d@%d not terminated", p, o)
		}
		out = append(out, rec)
	}
}

// readN reads n bytes; n < 0 means null.
func readN(r *bufio.Reader, n int) ([]byte, error) {
	if n < 0 {
		return nil, nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("kcat output: short read: %w", err)
	}
	return b, nil
}

func parseKcatHeaders(raw []byte) (map[[2]int64][]Header, error) {
	out := make(map[[2]int64][]Header)
	dec := json.NewDecoder(bytes.NewReader(raw))
	for dec.More() {
		var env struct {
			Partition int64    `json:"partition"`
			Offset    int64    `json:"offset"`
			Headers   []string `json:"headers"`
		}
		if err := dec.Decode(&env); err != nil {
			return nil, fmt.Errorf("kcat JSON output: %w", err)
		}
		if len(env.Headers)%2 != 0 {
			return nil, fmt.Errorf("kcat JSON output: odd header list at %d@%d", env.Partition, env.Offset)
		}
		hs := make([]Header, 0, len(env.Headers)/2)
		for i := 0; i < len(env.Headers); i += 2 {
			hs = append(hs, Header{Key: env.Headers[i], Value: env.Headers[i+1]})
		}
		out[[2]int64{env.Partition, env.Offset}] = hs
	}
	return out, nil
}
