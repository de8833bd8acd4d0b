package relay_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/pkg/kafkasasl"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

func TestWithDefaultsFillsZeroFields(t *testing.T) {
	c, err := (&relay.Config{DatabaseURL: "postgres://localhost/db"}).WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	for name, ok := range map[string]bool{
		"table":         c.Table == relay.DefaultTable,
		"slot":          c.Slot == relay.DefaultSlot,
		"publication":   c.Publication == relay.DefaultPublication,
		"topictemplate": c.TopicTemplate == "outbox.{aggregate_type}",
		"dlq":           c.DeadLetterTopic == relay.DefaultDeadLetterTopic,
		"oninvalid":     c.OnInvalid == relay.InvalidDeadLetter,
		"ongap":         c.OnGap == relay.GapStop,
		"unavailable":   c.OnUnavailableTopic == relay.UnavailableDeadLetter,
		"compression":   c.Kafka.Compression == "none",
		"batch":         c.BatchSize == relay.DefaultBatchSize,
		"buffer":        c.BufferBytes == relay.DefaultBufferBytes,
		"progress":      c.Kafka.ProgressTopic == contract.DefaultProgressTopic,
		"logger":        c.Logger != nil,
	} {
		if !ok {
			t.Errorf("%s: default not set: %+v", name, c)
		}
	}
	if c, _ := (&relay.Config{DatabaseURL: "x", RetryBackoff: time.Minute}).WithDefaults(); c.MaxRetryBackoff != time.Minute {
		t.Errorf("MaxRetryBackoff %v below RetryBackoff: want it raised to 1m", c.MaxRetryBackoff)
	}
	if c, _ := (&relay.Config{DatabaseURL: "x", TableFormat: "debezium"}).WithDefaults(); c.TopicTemplate != "outbox.event.{aggregate_type}" {
		t.Errorf("debezium topic template %q", c.TopicTemplate)
	}
}

func TestWithDefaultsRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  relay.Config
		want string // in the error
	}{
		{"no database", relay.Config{}, "database URL is required"},
		{"sink", relay.Config{DatabaseURL: "x", Sink: "carrier-pigeon"}, `sink "carrier-pigeon": no such sink (registered: kafka`},
		{"require tls", relay.Config{DatabaseURL: "postgres://db.example.com/x?sslmode=require", RequireTLS: true}, "require TLS"},
		{"table", relay.Config{DatabaseURL: "x", Table: "a.b.c"}, "table:"},
		{"format", relay.Config{DatabaseURL: "x", TableFormat: "kafka-connect"}, "table format"},
		{"slot", relay.Config{DatabaseURL: "x", Slot: "Bad-Slot"}, "slot \"Bad-Slot\""},
		{"dlq", relay.Config{DatabaseURL: "x", DeadLetterTopic: "a b"}, "dead-letter topic"},
		{"allowed", relay.Config{DatabaseURL: "x", AllowedTopics: []string{"ok", "not ok"}}, "allowed topic prefix"},
		{"template", relay.Config{DatabaseURL: "x", TopicTemplate: "a/{event_type}"}, "topic template"},
		{"on-invalid", relay.Config{DatabaseURL: "x", OnInvalid: "skip"}, "on-invalid"},
		{"on-unavailable", relay.Config{DatabaseURL: "x", OnUnavailableTopic: "skip"}, "on-unavailable-topic"},
		{"on-gap", relay.Config{DatabaseURL: "x", OnGap: "ignore"}, "on-gap"},
		{"compression", relay.Config{DatabaseURL: "x", Kafka: relay.KafkaConfig{Compression: "brotli"}}, "compression \"brotli\""},
		{"progress is dlq", relay.Config{DatabaseURL: "x", ExactlyOnce: true, Kafka: relay.KafkaConfig{ProgressTopic: "d"}, DeadLetterTopic: "d"}, "is the dead-letter topic"},
		{"progress topic", relay.Config{DatabaseURL: "x", ExactlyOnce: true, Kafka: relay.KafkaConfig{ProgressTopic: "a b"}}, "progress topic"},
		{"sasl mechanism", relay.Config{DatabaseURL: "x", Kafka: relay.KafkaConfig{SASL: &kafkasasl.Config{Mechanism: "GSSAPI"}}}, "SASL mechanism \"GSSAPI\""},
		{"sasl user", relay.Config{DatabaseURL: "x", Kafka: relay.KafkaConfig{SASL: &kafkasasl.Config{Mechanism: kafkasasl.SCRAMSHA256}}}, "needs a username"},
		{"sasl token", relay.Config{DatabaseURL: "x", Kafka: relay.KafkaConfig{SASL: &kafkasasl.Config{Mechanism: kafkasasl.OAuthBearer}}}, "needs a token file"},
		{"aws key without secret", relay.Config{DatabaseURL: "x", Kafka: relay.KafkaConfig{SASL: &kafkasasl.Config{Mechanism: kafkasasl.AWSMSKIAM, Username: "AKIAEXAMPLE"}}}, "needs the password"},
		{"aws secret without key", relay.Config{DatabaseURL: "x", Kafka: relay.KafkaConfig{SASL: &kafkasasl.Config{Mechanism: kafkasasl.AWSMSKIAM, SessionToken: "t"}}}, "needs the username"},
		{"negative duration", relay.Config{DatabaseURL: "x", PruneAfter: -time.Second}, "prune after -1s is negative"},
		{"negative size", relay.Config{DatabaseURL: "x", BatchSize: -1}, "batch size -1 is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.WithDefaults()
			if !errors.Is(err, relaytype.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrConfig naming %q", err, tc.want)
			}
		})
	}
}

func TestWithDefaultsNamesEveryProblem(t *testing.T) {
	_, err := (&relay.Config{Slot: "X", OnGap: "x"}).WithDefaults()
	for _, want := range []string{"database URL", "slot", "on-gap"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to name %s", err, want)
		}
	}
}

func TestCheckBrokers(t *testing.T) {
	if err := (&relay.Config{}).CheckBrokers(); !errors.Is(err, relaytype.ErrConfig) {
		t.Errorf("no brokers: %v", err)
	}
	if err := (&relay.Config{Kafka: relay.KafkaConfig{Brokers: []string{"k:9092"}}}).CheckBrokers(); err != nil {
		t.Errorf("brokers: %v", err)
	}
}

func TestNilConfig(t *testing.T) {
	var c *relay.Config
	if _, err := c.WithDefaults(); !errors.Is(err, relaytype.ErrConfig) {
		t.Errorf("nil config: %v", err)
	}
}

// CloudEventsSource defaults to the database of DatabaseURL and the table.
func TestDefaultCloudEventsSource(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, table, want string }{
		{"postgres://u:secret@db.example:5432/shop?sslmode=disable", "", "/pgoutbox/shop/public.outbox"},
		{"host=db dbname='my db' password=secret", "sales.outboxevent", "/pgoutbox/my%20db/sales.outboxevent"},
	} {
		c, err := (&relay.Config{DatabaseURL: tc.url, Table: tc.table, CloudEvents: true}).WithDefaults()
		if err != nil || c.CloudEventsSource != tc.want {
			t.Errorf("%s %s: source %q (%v), want %q", tc.url, tc.table, c.CloudEventsSource, err, tc.want)
		}
	}
}
