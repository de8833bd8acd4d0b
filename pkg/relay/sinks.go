package relay

import (
	"github.com/pgoutbox/pgoutbox/internal/publish/natspub"
	"github.com/pgoutbox/pgoutbox/internal/publish/rabbitmqpub"
)

// sinkSettings are the settings of the publisher c.Sink names: kafka's
// (given) for Kafka, or those of another broker derived from c.
func sinkSettings(c *Config, kafka any) any {
	switch c.Sink {
	case natspub.Name:
		return natspub.Config{URL: c.SinkURL, TLS: c.SinkTLS.Config, CredentialsFile: c.SinkTLS.CredentialsFile}
	case rabbitmqpub.Name:
		// The producer is named from the session's slot identity, which
		// holds the slot's incarnation (publish.Session.Slot).
		return rabbitmqpub.Config{URI: c.SinkURL, TLS: c.SinkTLS.Config}
	}
	return kafka
}

// checkSinkURL reports a sink other than Kafka without its address, and
// sink TLS settings the sink does not read.
func (c *Config) checkSinkURL(bad func(string, ...any)) {
	if (c.Sink == natspub.Name || c.Sink == rabbitmqpub.Name) && c.SinkURL == "" {
		bad("sink %s: a sink URL is required", c.Sink)
	}
	switch {
	case c.Sink != natspub.Name && c.Sink != rabbitmqpub.Name && c.SinkTLS != (SinkTLS{}):
		bad("sink TLS is for the nats and rabbitmq sinks; Kafka's TLS is in Kafka.TLS")
	case c.Sink != natspub.Name && c.SinkTLS.CredentialsFile != "":
		bad("sink credentials file: a NATS credentials file, for the nats sink only")
	}
}
