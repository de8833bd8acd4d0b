package kafkaclient

import (
	"crypto/tls"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// clientID is the client ID of the inbox's Kafka requests.
const clientID = "pgoutbox-inbox"

// Opts are the options of a kgo client of brokers with the relay's TLS
// dialer and SASL mechanisms (one implementation for both sides), followed
// by more.
func Opts(brokers []string, tlsCfg *tls.Config, sasl *relay.SASL, more ...kgo.Opt) []kgo.Opt {
	return relay.KafkaClientOpts(&relay.Config{Brokers: brokers, TLS: tlsCfg, SASL: sasl},
		append([]kgo.Opt{kgo.ClientID(clientID)}, more...)...)
}

// CheckSASL reports whether s (nil: none) names a mechanism with the
// credentials it needs; the error never carries a credential.
func CheckSASL(s *relay.SASL) error {
	if s == nil {
		return nil
	}
	_, err := s.KafkaMechanism()
	return err
}
