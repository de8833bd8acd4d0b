package relay

import (
	"context"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/producer"
	// The relay speaks AWS_MSK_IAM: Config.Kafka.SASL may name it.
	_ "github.com/pgoutbox/pgoutbox/pkg/kafkasasl/awsmsk"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// KafkaClientOpts are the options of a franz-go client of cfg.Kafka's
// brokers with its TLS and SASL, as the relay's own clients dial them, followed
// by more: for a tool that talks to the relay's cluster beside it (relay
// run --config joins its spread group with them). A SASL configuration
// that does not build fails closed: every dial of the client fails with
// its error, so a client asked for SASL never talks to a broker without it.
func KafkaClientOpts(cfg *Config, more ...kgo.Opt) []kgo.Opt {
	pc, err := kafkaConn(cfg)
	if err != nil { // pc has no SASL then
		more = append([]kgo.Opt{kgo.Dialer(func(context.Context, string, string) (net.Conn, error) { return nil, err })}, more...)
	}
	return producer.ClientOpts(pc, more...)
}

// kafkaConn is the producer configuration of cfg.Kafka's brokers, TLS
// and SASL: what every Kafka client of the relay connects with. Its error,
// a SASL configuration that does not build, wraps relaytype.ErrConfig.
func kafkaConn(cfg *Config) (producer.Config, error) {
	pc := producer.Config{Brokers: cfg.Kafka.Brokers, TLS: cfg.Kafka.TLS}
	if cfg.Kafka.SASL != nil {
		m, err := cfg.Kafka.SASL.KafkaMechanism()
		if err != nil {
			return pc, fmt.Errorf("%w: %w", relaytype.ErrConfig, err)
		}
		pc.SASL = m
	}
	return pc, nil
}
