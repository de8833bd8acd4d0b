package relaytype_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

func TestWithDefaultsFillsZeroFields(t *testing.T) {
	c, err := (&relaytype.Config{DatabaseURL: "postgres://localhost/db"}).WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	for name, ok := range map[string]bool{
		"table":         c.Table == relaytype.DefaultTable,
		"slot":          c.Slot == relaytype.DefaultSlot,
		"publication":   c.Publication == relaytype.DefaultPublication,
		"topictemplate": c.TopicTemplate == "outbox.{aggregate_type}",
		"dlq":           c.DeadLetterTopic == relaytype.DefaultDeadLetterTopic,
		"oninvalid":     c.OnInvalid == relaytype.InvalidDeadLetter,
		"ongap":         c.OnGap == relaytype.GapStop,
		"unavailable":   c.OnUnavailableTopic == relaytype.UnavailableDeadLetter,
		"compression":   c.Compression == "none",
		"batch":         c.BatchSize == relaytype.DefaultBatchSize,
		"buffer":        c.BufferBytes == relaytype.DefaultBufferBytes,
		"progress":      c.ProgressTopic == relaytype.DefaultProgressTopic,
		"logger":        c.Logger != nil,
	} {
		if !ok {
			t.Errorf("%s: default not set: %+v", name, c)
		}
	}
	if c, _ := (&relaytype.Config{DatabaseURL: "x", RetryBackoff: time.Minute}).WithDefaults(); c.MaxRetryBackoff != time.Minute {
		t.Errorf("MaxRetryBackoff %v below RetryBackoff: want it raised to 1m", c.MaxRetryBackoff)
	}
	if c, _ := (&relaytype.Config{DatabaseURL: "x", TableFormat: "debezium"}).WithDefaults(); c.TopicTemplate != "outbox.event.{aggregate_type}" {
		t.Errorf("debezium topic template %q", c.TopicTemplate)
	}
}

func TestWithDefaultsRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  relaytype.Config
		want string // in the error
	}{
		{"no database", relaytype.Config{}, "database URL is required"},
		{"require tls", relaytype.Config{DatabaseURL: "postgres://db.example.com/x?sslmode=require", RequireTLS: true}, "require TLS"},
		{"table", relaytype.Config{DatabaseURL: "x", Table: "a.b.c"}, "table:"},
		{"format", relaytype.Config{DatabaseURL: "x", TableFormat: "kafka-connect"}, "table format"},
		{"slot", relaytype.Config{DatabaseURL: "x", Slot: "Bad-Slot"}, "slot \"Bad-Slot\""},
		{"dlq", relaytype.Config{DatabaseURL: "x", DeadLetterTopic: "a b"}, "dead-letter topic"},
		{"allowed", relaytype.Config{DatabaseURL: "x", AllowedTopics: []string{"ok", "not ok"}}, "allowed topic prefix"},
		{"template", relaytype.Config{DatabaseURL: "x", TopicTemplate: "a/{event_type}"}, "topic template"},
		{"on-invalid", relaytype.Config{DatabaseURL: "x", OnInvalid: "skip"}, "on-invalid"},
		{"on-unavailable", relaytype.Config{DatabaseURL: "x", OnUnavailableTopic: "skip"}, "on-unavailable-topic"},
		{"on-gap", relaytype.Config{DatabaseURL: "x", OnGap: "ignore"}, "on-gap"},
		{"compression", relaytype.Config{DatabaseURL: "x", Compression: "brotli"}, "compression \"brotli\""},
		{"progress is dlq", relaytype.Config{DatabaseURL: "x", ExactlyOnce: true, ProgressTopic: "d", DeadLetterTopic: "d"}, "is the dead-letter topic"},
		{"progress topic", relaytype.Config{DatabaseURL: "x", ExactlyOnce: true, ProgressTopic: "a b"}, "progress topic"},
		{"sasl mechanism", relaytype.Config{DatabaseURL: "x", SASL: &relaytype.SASL{Mechanism: "GSSAPI"}}, "SASL mechanism \"GSSAPI\""},
		{"sasl user", relaytype.Config{DatabaseURL: "x", SASL: &relaytype.SASL{Mechanism: relaytype.SASLSCRAMSHA256}}, "needs a username"},
		{"sasl token", relaytype.Config{DatabaseURL: "x", SASL: &relaytype.SASL{Mechanism: relaytype.SASLOAuthBearer}}, "needs a token file"},
		{"negative duration", relaytype.Config{DatabaseURL: "x", PruneAfter: -time.Second}, "prune after -1s is negative"},
		{"negative size", relaytype.Config{DatabaseURL: "x", BatchSize: -1}, "batch size -1 is negative"},
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
	_, err := (&relaytype.Config{Slot: "X", OnGap: "x"}).WithDefaults()
	for _, want := range []string{"database URL", "slot", "on-gap"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to name %s", err, want)
		}
	}
}

func TestCheckBrokers(t *testing.T) {
	if err := (&relaytype.Config{}).CheckBrokers(); !errors.Is(err, relaytype.ErrConfig) {
		t.Errorf("no brokers: %v", err)
	}
	if err := (&relaytype.Config{Brokers: []string{"k:9092"}}).CheckBrokers(); err != nil {
		t.Errorf("brokers: %v", err)
	}
}

func TestNilConfig(t *testing.T) {
	var c *relaytype.Config
	if _, err := c.WithDefaults(); !errors.Is(err, relaytype.ErrConfig) {
		t.Errorf("nil config: %v", err)
	}
}
