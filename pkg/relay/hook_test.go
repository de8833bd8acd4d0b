package relay_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relayhook"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// hookRecord is what a relay hook saw of one record.
type hookRecord struct {
	id, topic, key, value, traceparent string
	partition                          int32
	offset                             int64
	commitLSN                          uint64
	commit                             time.Time
	deadLetter                         bool
}

// recordingHooks implements every relayhook interface and keeps what it
// saw.
type recordingHooks struct {
	mu         sync.Mutex
	built      []hookRecord
	read       int
	written    []hookRecord
	writes     []relayhook.BatchWritten
	committed  []relayhook.TxnCommitted
	dead       []hookRecord
	deadReason []string
}

func seen(r relayhook.Record) hookRecord {
	tp, _ := r.Header("traceparent")
	return hookRecord{id: r.MessageID(), topic: r.Topic(), key: string(r.Key()), value: string(r.Value()), traceparent: string(tp),
		partition: r.Partition(), offset: r.Offset(), commitLSN: r.CommitLSN(), commit: r.Commit(), deadLetter: r.DeadLetter()}
}

func (h *recordingHooks) OnRecordBuilt(b relayhook.RecordBuilt) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := seen(b.Record)
	if b.Read.Before(r.commit) {
		r.value = "read before its commit"
	}
	h.built = append(h.built, r)
}

func (h *recordingHooks) OnBatchRead(b relayhook.BatchRead) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.read += b.Events
}

func (h *recordingHooks) OnBatchWritten(w relayhook.BatchWritten) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range w.Records {
		h.written = append(h.written, seen(r))
	}
	w.Records = nil // valid only during the call
	h.writes = append(h.writes, w)
}

func (h *recordingHooks) OnTxnCommitted(c relayhook.TxnCommitted) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.committed = append(h.committed, c)
}

func (h *recordingHooks) OnDeadLettered(d relayhook.DeadLettered) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dead = append(h.dead, seen(d.Record))
	h.deadReason = append(h.deadReason, d.Reason)
}

// Each relay hook of Config.Hooks fires with the right data on a real
// relay run, in both modes: every row's record built once (commit LSN and
// time, no partition yet), the batches read, each record written with the
// partition and offset Kafka holds it at, the row that cannot be
// published dead-lettered with its reason and where its dead letter
// landed, and, in exactly-once mode, the Kafka transactions committed. The
// messaging metrics, a hook of every relay, count the same writes.
func TestHooksFireOnARelayRun(t *testing.T) {
	t.Parallel()
	for _, eos := range []bool{false, true} {
		t.Run(fmt.Sprintf("exactly-once=%v", eos), func(t *testing.T) {
			t.Parallel()
			h := &recordingHooks{}
			b := setup(t, func(c *relay.Config) { c.ExactlyOnce = eos; c.Hooks = []relayhook.Hook{h, "implements nothing"} })
			b.start(t)
			ids := b.insert(t, msg("a", 1), msg("b", 2), msg("a", 3))
			ctx := context.Background()
			// A row naming a header the relay writes: dead-lettered (bad-headers).
			if _, err := b.db.Pool.Exec(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, business_key, payload, headers)
				VALUES ('0190f0e0-0000-7000-8000-0000000000dd', 'order', 'd', 'order.created', 'bk-d', '{}', '{"dlq-reason": "forged"}')`); err != nil {
				t.Fatal(err)
			}
			recs := testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.order", 3, time.Minute)
			dlq := testenv.WaitForRecords(t, b.kafka.Brokers, relay.DefaultDeadLetterTopic, 1, time.Minute)
			testenv.WaitFor(t, time.Minute, "hooks", func() (bool, error) {
				h.mu.Lock()
				defer h.mu.Unlock()
				held := 0
				for _, c := range h.committed {
					held += c.Records
				}
				return len(h.written) >= 4 && len(h.dead) == 1 && (!eos || held >= 4), nil
			})
			h.mu.Lock()
			defer h.mu.Unlock()

			byID := map[string]testenv.Record{}
			for _, r := range recs {
				id, _ := r.Header("message-id")
				byID[id] = r
			}
			if len(h.built) != 4 {
				t.Fatalf("%d records built, want 4: %+v", len(h.built), h.built)
			}
			for i, r := range h.built {
				if r.partition != -1 || r.offset != -1 || r.commitLSN == 0 || r.commit.IsZero() || r.value == "read before its commit" {
					t.Errorf("built record %d: %+v", i, r)
				}
				if i < 3 && (r.id != ids[i] || r.topic != "outbox.order" || r.deadLetter) {
					t.Errorf("built record %d: %+v, want message %s to outbox.order", i, r, ids[i])
				}
			}
			if h.built[0].commitLSN != h.built[2].commitLSN || h.built[3].commitLSN <= h.built[0].commitLSN {
				t.Errorf("commit LSNs %d %d %d %d: want one for the first transaction, a later one for the second",
					h.built[0].commitLSN, h.built[1].commitLSN, h.built[2].commitLSN, h.built[3].commitLSN)
			}
			if !h.built[3].deadLetter || h.built[3].topic != relay.DefaultDeadLetterTopic {
				t.Errorf("the forged row built as %+v, want a dead letter", h.built[3])
			}
			wantRead := 4
			if eos {
				wantRead += 2 // each transaction's end marker
			}
			if h.read != wantRead {
				t.Errorf("%d events in the batches read, want %d", h.read, wantRead)
			}
			for _, w := range h.written {
				if w.deadLetter {
					continue
				}
				k, ok := byID[w.id]
				if !ok || k.Partition != w.partition || k.Offset != w.offset || w.value != string(k.Value) {
					t.Errorf("written %+v; Kafka holds it at partition %d offset %d (found %v)", w, k.Partition, k.Offset, ok)
				}
			}
			for _, w := range h.writes {
				if w.Err != nil || w.Transactional != eos || w.End.Before(w.Start) {
					t.Errorf("write %+v (want transactional %v)", w, eos)
				}
			}
			d := h.dead[0]
			if h.deadReason[0] != relaytype.ReasonBadHeaders || d.id != "0190f0e0-0000-7000-8000-0000000000dd" || d.topic != relay.DefaultDeadLetterTopic ||
				d.partition != dlq[0].Partition || d.offset != dlq[0].Offset || !d.deadLetter {
				t.Errorf("dead-lettered %+v (%s); the dead letter is at partition %d offset %d", d, h.deadReason[0], dlq[0].Partition, dlq[0].Offset)
			}
			held := 0
			for _, c := range h.committed {
				if c.Err != nil || c.ProgressLSN == 0 || c.End.Before(c.Start) {
					t.Errorf("commit %+v", c)
				}
				held += c.Records
			}
			// The messaging metrics count the same writes.
			if n := testenv.MetricValue(t, b.reg, "messaging_client_sent_messages_total", "messaging_destination_name", "outbox.order"); n != 3 {
				t.Errorf("messaging_client_sent_messages_total{messaging_destination_name=outbox.order} = %v, want 3", n)
			}
			if n := testenv.MetricValue(t, b.reg, "messaging_client_operation_duration_seconds", "messaging_operation_name", "send"); n != float64(len(h.writes)) {
				t.Errorf("messaging_client_operation_duration_seconds counts %v writes, the hook saw %d", n, len(h.writes))
			}
			if !eos && len(h.committed) > 0 || eos && held != 4 {
				t.Errorf("transactions committed %+v (%d records held), want %v", h.committed, held, map[bool]string{true: "4 records", false: "none"}[eos])
			}
		})
	}
}
