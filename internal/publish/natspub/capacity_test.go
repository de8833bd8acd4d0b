package natspub_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/pgoutbox/pgoutbox/internal/publish/natspub"
)

// BenchmarkStreamAtomicBatches measures what one JetStream stream takes:
// atomic batches of 1,000 messages shaped as the relay's (a 300-byte
// value, the relay's five headers, Nats-Msg-Id, 16 bucket subjects) into
// testenv's server (file storage, synced before each answer), with depth
// batches awaiting their answer at a time. The relay has one in flight
// (depth 1); the deeper runs tell whether more in flight would raise the
// NATS sink's drain (docs/benchmarks.md). It prints messages a second:
//
//	go test -run XXX -bench StreamAtomicBatches -benchtime 200x ./internal/publish/natspub
func BenchmarkStreamAtomicBatches(b *testing.B) {
	for _, depth := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			n, _ := atomicStream(b)
			js := n.JetStream(b)
			value := []byte(`{"data":"` + strings.Repeat("x", 280) + `"}`)
			batch := func(w int) []*nats.Msg {
				msgs := make([]*nats.Msg, 1000)
				for i := range msgs {
					id := fmt.Sprintf("%08x-0000-4000-8000-%012x", w, i)
					key := fmt.Sprintf("payment-%d", (w*len(msgs)+i)%10_000)
					msgs[i] = &nats.Msg{Subject: natspub.Subject("outbox.payment", []byte(key), 16), Data: value, Header: nats.Header{
						"message-id": {id}, "Nats-Msg-Id": {id}, "business-key": {"bk-" + id},
						"event-type": {"payment.created"}, "aggregate-type": {"payment"}, "aggregate-id": {key},
					}}
				}
				return msgs
			}
			// Built before the clock starts: the relay builds its messages
			// in a process of its own.
			batches := make([][]*nats.Msg, b.N)
			for w := range batches {
				batches[w] = batch(w)
			}
			slots := make(chan struct{}, depth)
			var wg sync.WaitGroup
			b.ResetTimer()
			for _, msgs := range batches {
				slots <- struct{}{}
				wg.Go(func() {
					defer func() { <-slots }()
					if _, err := jetstreamext.PublishMsgBatch(b.Context(), js, msgs); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
