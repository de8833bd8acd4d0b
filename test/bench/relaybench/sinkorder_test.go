package main

import (
	"strings"
	"testing"
)

func TestSinkOrder(t *testing.T) {
	for _, c := range []struct {
		sinks  string
		rounds int
		want   string
	}{
		{"kafka,nats,rabbitmq", 1, "kafka nats rabbitmq"},
		{"kafka,nats,rabbitmq", 3, "kafka nats rabbitmq rabbitmq nats kafka kafka nats rabbitmq"},
		{"nats,kafka", 2, "nats kafka kafka nats"},
	} {
		sinks, err := parseSinks(c.sinks)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(sinkOrder(sinks, c.rounds), " "); got != c.want {
			t.Errorf("%s, %d rounds: %q, want %q", c.sinks, c.rounds, got, c.want)
		}
	}
}

func TestParseSinksRefuses(t *testing.T) {
	for _, v := range []string{"nats,rabbitmq", "kafka,kafka", "kafka,sqs", ""} {
		if _, err := parseSinks(v); err == nil {
			t.Errorf("parseSinks(%q) accepted it", v)
		}
	}
}
