package relay

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/producer"
)

// KafkaClientOpts are the options of a franz-go client of cfg's brokers
// with cfg's TLS and SASL, as the relay's own clients dial them, followed
// by more: for a tool that talks to the relay's cluster beside it (relay
// run --config joins its spread group with them).
func KafkaClientOpts(cfg *Config, more ...kgo.Opt) []kgo.Opt {
	return producer.ClientOpts(producer.Config{Brokers: cfg.Brokers, TLS: cfg.TLS, SASL: (*producer.SASL)(cfg.SASL)}, more...)
}
