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
		return natspub.Config{URL: c.SinkURL}
	case rabbitmqpub.Name:
		// The producer is named from the session's slot identity, which
		// holds the slot's incarnation (publish.Session.Slot).
		return rabbitmqpub.Config{URI: c.SinkURL}
	}
	return kafka
}

// checkSinkURL reports a sink other than Kafka without its address.
func (c *Config) checkSinkURL(bad func(string, ...any)) {
	if (c.Sink == natspub.Name || c.Sink == rabbitmqpub.Name) && c.SinkURL == "" {
		bad("sink %s: a sink URL is required", c.Sink)
	}
}
