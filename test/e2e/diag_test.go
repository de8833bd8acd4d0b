package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// keepRelayLog copies the relay log at logPath into the directory
// PGOUTBOX_TEST_KEEP names, when set, for a look after the test.
func keepRelayLog(t *testing.T, logPath string) {
	t.Helper()
	dir := os.Getenv("PGOUTBOX_TEST_KEEP")
	if dir == "" {
		return
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Log(err)
		return
	}
	p := fmt.Sprintf("%s/%s-%d.relay.log", dir, t.Name(), time.Now().Unix())
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Log(err)
		return
	}
	t.Logf("relay log kept in %s", p)
}

// dumpDuplicates logs, for a failed exactly-once check, where the copies
// of duplicated messages lie, as a read_committed reader gets them (topic,
// partition, offset, producer ID and epoch), and the progress records of
// slot, committed or not.
func dumpDuplicates(t *testing.T, kafka *testenv.Kafka, topics []string, slot string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out strings.Builder
	copies := make(map[string][]*kgo.Record)
	for _, topic := range topics {
		for _, r := range readAll(ctx, t, kafka, kafka.Topic(topic), true) {
			for _, h := range r.Headers {
				if h.Key == "message-id" {
					copies[string(h.Value)] = append(copies[string(h.Value)], r)
				}
			}
		}
	}
	var dups []string
	for id, rs := range copies {
		if len(rs) > 1 {
			dups = append(dups, id)
		}
	}
	slices.SortFunc(dups, func(a, b string) int { return copies[a][0].Timestamp.Compare(copies[b][0].Timestamp) })
	fmt.Fprintf(&out, "%d duplicated message IDs (read_committed); the first and last 10:\n", len(dups))
	for i, id := range dups {
		if i >= 10 && i < len(dups)-10 {
			continue
		}
		fmt.Fprintf(&out, "  %s:", id)
		for _, r := range copies[id] {
			fmt.Fprintf(&out, " [%s/%d@%d producer %d epoch %d %s]", r.Topic, r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch, r.Timestamp.Format("15:04:05.000"))
		}
		out.WriteString("\n")
	}
	for _, committed := range []bool{true, false} {
		fmt.Fprintf(&out, "progress records of the slot (read_committed %v):\n", committed)
		for _, r := range readAll(ctx, t, kafka, contract.DefaultProgressTopic, committed) {
			if strings.Contains(string(r.Key), "/"+slot+"/") { // pgoutbox-relay/<system>/<slot>/<incarnation>
				fmt.Fprintf(&out, "  @%d producer %d epoch %d %s %s\n", r.Offset, r.ProducerID, r.ProducerEpoch, r.Timestamp.Format("15:04:05.000"), r.Value)
			}
		}
	}
	t.Log(out.String())
}

// readAll reads every record of topic there is, read_committed or not.
func readAll(ctx context.Context, t *testing.T, kafka *testenv.Kafka, topic string, committed bool) []*kgo.Record {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	// With the markers kept, the last offset below the end is read
	// whatever the isolation: a committed record or a marker.
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka.Brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords())
	if err != nil {
		t.Log(err)
		return nil
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	list := adm.ListEndOffsets
	if committed {
		list = adm.ListCommittedOffsets
	}
	listed, err := list(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		t.Logf("list the end offsets of %s: %v", topic, err)
		return nil
	}
	left := make(map[int32]int64) // partition -> end, while not reached
	listed.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	var recs []*kgo.Record
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Logf("read %s: %v", topic, ctx.Err())
			return recs
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
			if !r.Attrs.IsControl() {
				recs = append(recs, r)
			}
		})
	}
	return recs
}
