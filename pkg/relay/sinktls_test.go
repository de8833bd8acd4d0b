package relay_test

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// SinkTLS is for the nats and rabbitmq sinks, and its credentials file for
// nats only: any other use is a configuration error naming it.
func TestSinkTLSBelongsToItsSinks(t *testing.T) {
	withTLS := relay.SinkTLS{Config: &tls.Config{MinVersion: tls.VersionTLS12}}
	withCreds := relay.SinkTLS{CredentialsFile: "relay.creds"}
	for _, c := range []struct {
		sink string
		tls  relay.SinkTLS
		bad  string // "" for valid
	}{
		{"nats", withTLS, ""},
		{"nats", withCreds, ""},
		{"rabbitmq", withTLS, ""},
		{"rabbitmq", withCreds, "for the nats sink only"},
		{"kafka", withTLS, "Kafka's TLS is in Kafka.TLS"},
		{"", withCreds, "Kafka's TLS is in Kafka.TLS"},
	} {
		cfg := &relay.Config{DatabaseURL: "x", Sink: c.sink, SinkURL: "u", SinkTLS: c.tls}
		if c.sink == "kafka" || c.sink == "" {
			cfg.SinkURL = ""
		}
		_, err := cfg.WithDefaults()
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%q with %+v: %v", c.sink, c.tls, err)
		case c.bad != "" && (!errors.Is(err, relaytype.ErrConfig) || !strings.Contains(err.Error(), c.bad)):
			t.Errorf("%q with %+v: err = %v, want one saying %q", c.sink, c.tls, err, c.bad)
		}
	}
}
