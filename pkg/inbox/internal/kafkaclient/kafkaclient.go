package kafkaclient

import (
	"context"
	"crypto/tls"
	"net"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pkg/kafkasasl"
)

// clientID is the client ID of the inbox's Kafka requests.
const clientID = "pgoutbox-inbox"

// Opts are the options of a kgo client of brokers with tlsCfg (kgo sets
// the server name per broker) and the SASL mechanism of sasl (nil: none),
// followed by more. A SASL configuration that does not build fails
// closed: every dial fails with its error, so a client asked for SASL
// never talks to a broker without it.
func Opts(brokers []string, tlsCfg *tls.Config, sasl *kafkasasl.Config, more ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID(clientID), kgo.DisableClientMetrics()}
	if tlsCfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	if sasl != nil {
		m, err := sasl.KafkaMechanism()
		if err != nil {
			opts = append(opts, kgo.Dialer(func(context.Context, string, string) (net.Conn, error) { return nil, err }))
		} else {
			opts = append(opts, kgo.SASL(m))
		}
	}
	return append(opts, more...)
}

// CheckSASL reports whether s (nil: none) names a mechanism with the
// credentials it needs, linked into this program; the error never carries
// a credential.
func CheckSASL(s *kafkasasl.Config) error {
	if s == nil {
		return nil
	}
	_, err := s.KafkaMechanism()
	return err
}
