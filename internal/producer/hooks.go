package producer

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errorHook calls fn for each failed connection attempt and each produce
// request that could not be written or whose answer could not be read:
// the failures the client retries by itself, which the caller never sees.
type errorHook struct{ fn func() }

var (
	_ kgo.HookBrokerConnect = errorHook{}
	_ kgo.HookBrokerWrite   = errorHook{}
	_ kgo.HookBrokerRead    = errorHook{}
)

func (h errorHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		h.fn()
	}
}

func (h errorHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil && key == int16(kmsg.Produce) {
		h.fn()
	}
}

func (h errorHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil && key == int16(kmsg.Produce) {
		h.fn()
	}
}

// endTxnHook counts the EndTxn requests the client wrote (in whole or in
// part) and those it read an answer to: a request written and never
// answered (its connection cut or timed out) may still reach the
// coordinator, later than the retry the client made of it.
type endTxnHook struct {
	written, answered atomic.Int64
}

var (
	_ kgo.HookBrokerWrite = (*endTxnHook)(nil)
	_ kgo.HookBrokerRead  = (*endTxnHook)(nil)
)

func (h *endTxnHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, _ error) {
	if key == int16(kmsg.EndTxn) && n > 0 {
		h.written.Add(1)
	}
}

func (h *endTxnHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.EndTxn) && err == nil {
		h.answered.Add(1)
	}
}

// unanswered is how many EndTxn requests written so far went unanswered.
func (h *endTxnHook) unanswered() int64 { return h.written.Load() - h.answered.Load() }
