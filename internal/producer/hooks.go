package producer

import (
	"net"
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
