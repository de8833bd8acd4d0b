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

// ReadTopic reads every record of topic up to its end when the call starts,
// with kcat, and returns them in partition, offset order within a partition.
// kcat reads read_committed (librdkafka's default): records of aborted or
// still open Kafka transactions are never read.
//
// The end is taken first (kcat -Q) and each partition is read up to it, so a
// topic still being written does not keep kcat reading: kcat -e ends a
// partition only on a fetch that brings nothing new for it, and a writer
// whose produce requests hold every partition (the relay's) can answer every
// fetch for as long as it writes.
func ReadTopic(ctx context.Context, brokers []string, topic string) ([]Record, error) {
	return ReadTopicWith(ctx, brokers, topic)
}

// ReadTopicWith is ReadTopic with librdkafka properties for kcat ("name=value",
// each passed as -X): security.protocol and sasl.* for a broker that
// requires SASL, isolation.level=read_committed said explicitly.
func ReadTopicWith(ctx context.Context, brokers []string, topic string, props ...string) ([]Record, error) {
	if _, err := exec.LookPath("kcat"); err != nil {
		return nil, errors.New("kcat not found; install it with: apt-get install -y kcat")
	}
	var x []string
	for _, p := range props {
		x = append(x, "-X", p)
	}
	ends, err := topicEnds(ctx, brokers, topic, x)
	if err != nil {
		return nil, err
	}
	return readTo(ctx, brokers, topic, ends, x)
}

// readTo reads every partition of topic up to its end in ends (see
// ReadTopicWith).
func readTo(ctx context.Context, brokers []string, topic string, ends []int64, x []string) ([]Record, error) {
	var recs []Record
	for p, end := range ends {
		if end > 0 {
			part, err := readPartition(ctx, brokers, topic, int32(p), end, x)
			if err != nil {
				return nil, err
			}
			recs = append(recs, part...)
		}
	}
	return recs, nil
}

// topicEnds returns the end offset of each partition of topic, by partition
// number; a topic that does not exist is an error (and is not created). x
// are kcat -X arguments.
func topicEnds(ctx context.Context, brokers []string, topic string, x []string) ([]int64, error) {
	b := strings.Join(brokers, ",")
	raw, err := runKcat(ctx, append([]string{"-L", "-J", "-b", b, "-t", topic, "-X", "allow.auto.create.topics=false"}, x...))
	if err != nil {
		return nil, err
	}
	var md struct {
		Topics []struct {
			Topic      string `json:"topic"`
			Error      string `json:"error"`
			Partitions []struct {
				Partition int `json:"partition"`
			} `json:"partitions"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(raw, &md); err != nil {
		return nil, fmt.Errorf("kcat metadata: %w", err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Topic != topic {
		return nil, fmt.Errorf("kcat metadata: no answer for topic %s: %s", topic, raw)
	}
	if t := md.Topics[0]; t.Error != "" || len(t.Partitions) == 0 {
		return nil, fmt.Errorf("kcat metadata: topic %s: %s", topic, t.Error)
	}
	query := append([]string{"-Q", "-J", "-b", b}, x...)
	for _, p := range md.Topics[0].Partitions {
		query = append(query, "-t", fmt.Sprintf("%s:%d:-1", topic, p.Partition))
	}
	if raw, err = runKcat(ctx, query); err != nil {
		return nil, err
	}
	// {"<topic>": {"topic": "<topic>", "<partition>": {"partition": p, "offset": end}, ...}}
	var answer map[string]map[string]json.RawMessage
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, fmt.Errorf("kcat offsets: %w", err)
	}
	ends := make([]int64, len(md.Topics[0].Partitions))
	for _, p := range md.Topics[0].Partitions {
		var po struct {
			Offset *int64 `json:"offset"`
		}
		if err := json.Unmarshal(answer[topic][strconv.Itoa(p.Partition)], &po); err != nil || po.Offset == nil || p.Partition >= len(ends) {
			return nil, fmt.Errorf("kcat offsets: no end offset for %s/%d: %s", topic, p.Partition, raw)
		}
		ends[p.Partition] = *po.Offset
	}
	return ends, nil
}

// readPartition reads the records of one partition below offset end. kcat
// stops after end records (a partition's offsets start at 0 on a broker that
// deletes nothing); records at or past end are dropped.
func readPartition(ctx context.Context, brokers []string, topic string, partition int32, end int64, x []string) ([]Record, error) {
	base := []string{"-C", "-b", strings.Join(brokers, ","), "-t", topic, "-p", strconv.Itoa(int(partition)),
		"-o", "beginning", "-c", strconv.FormatInt(end, 10), "-e", "-q"}
	base = append(base, x...)
	raw, err := runKcat(ctx, append(base, "-f", kcatFormat))
	if err != nil {
		return nil, err
	}
	recs, err := parseKcat(topic, raw)
	if err != nil {
		return nil, err
	}
	for len(recs) > 0 && recs[len(recs)-1].Offset >= end {
		recs = recs[:len(recs)-1]
	}
	if len(recs) == 0 {
		return nil, nil
	}
	// -f cannot print headers unambiguously; the JSON envelope can. It reads
	// the same records.
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
//
// While the partitions' end offsets add up to fewer than n (each record
// takes an offset at least, so the topic cannot hold n yet) it reads no
// record: two kcat runs a poll instead of two more per partition, each
// reading the topic from its start again. Polled every 200 ms, those reads
// were most of the kernel time of the Kafka-facing test packages.
func WaitForRecords(t testing.TB, brokers []string, topic string, n int, timeout time.Duration) []Record {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var (
		last error
		recs []Record
		ends int64
	)
	for {
		// One read may take what is left of timeout (at least a
		// minute): under load kcat can need more than a minute to read
		// a large topic, and a read killed at a fixed bound would start
		// over, never to finish.
		ctx, cancel := context.WithTimeout(context.Background(), max(time.Until(deadline), time.Minute))
		byPartition, err := topicEnds(ctx, brokers, topic, nil)
		if err == nil {
			ends = 0
			for _, e := range byPartition {
				ends += e
			}
			if ends >= int64(n) {
				recs, err = readTo(ctx, brokers, topic, byPartition, nil)
			}
		}
		cancel()
		if err == nil && len(recs) >= n {
			return recs
		}
		last = err
		if time.Now().After(deadline) {
			t.Fatalf("kcat: %s holds %d records (%d offsets), want at least %d after %v (last error: %v)", topic, len(recs), ends, n, timeout, last)
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
