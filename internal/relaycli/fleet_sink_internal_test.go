package relaycli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A fleet file chooses each source's broker with sink: (in defaults: or
// per source) and its address with sink-url: or sink-url-file:, as
// --sink and --sink-url do: a NATS source beside a Kafka one, the URL's
// password read from its file and taught to the scrubber.
func TestLoadFleetSinks(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "sink-url")
	if err := os.WriteFile(secret, []byte("nats://relay:SinkPw1@nats-a:4222\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeFleet(t, `
defaults:
  sink: nats
  brokers: [k:9092]
sources:
  - name: events
    database-url: postgres://u@db-a:5432/a
    slot: events
    sink-url-file: `+secret+`
  - name: queues
    database-url: postgres://u@db-b:5432/b
    slot: queues
    sink: rabbitmq
    sink-url: rabbitmq-stream://u@mq:5552/
  - name: orders
    database-url: postgres://u@db-c:5432/c
    slot: orders
    sink: kafka
`)
	sc := &scrubber{}
	fc, err := loadFleet(path, sc)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range fc.Sources {
		got[s.Name] = s.Config.Sink + " " + s.Config.SinkURL
	}
	want := map[string]string{"events": "nats nats://relay:SinkPw1@nats-a:4222", "queues": "rabbitmq rabbitmq-stream://u@mq:5552/", "orders": " "}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: sink %q, want %q", name, got[name], w)
		}
	}
	if !strings.Contains(sc.String("password SinkPw1"), "xxxxx") {
		t.Error("the scrubber did not learn the password read from sink-url-file")
	}

	for _, tc := range []struct{ name, yaml, want string }{
		{"nats without url", "sources:\n  - name: a\n    database-url: postgres://u@db:5432/a\n    sink: nats\n", "--sink nats needs --sink-url"},
		{"kafka with url", "sources:\n  - name: a\n    database-url: postgres://u@db:5432/a\n    brokers: [k:9092]\n    sink-url: nats://n:4222\n", "--sink-url is for --sink nats or rabbitmq"},
		{"url twice", "sources:\n  - name: a\n    database-url: postgres://u@db:5432/a\n    sink: nats\n    sink-url: nats://n:4222\n    sink-url-file: " + secret + "\n", "sink-url or sink-url-file, not both"},
		{"unknown sink", "sources:\n  - name: a\n    database-url: postgres://u@db:5432/a\n    sink: kinesis\n", `"kinesis" is not one of kafka, nats, rabbitmq`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadFleet(writeFleet(t, tc.yaml), &scrubber{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// A sink URL's password, or a NATS token, is learned by the scrubber, for
// each URL of a comma separated list.
func TestAddSinkURL(t *testing.T) {
	sc := &scrubber{}
	addSinkURL(sc, "nats://relay:NatsPw12@a:4222, nats://TokenAbc123@b:4222,rabbitmq-stream://u:RabbitPw9@mq:5552/vh")
	out := sc.String("NatsPw12 TokenAbc123 RabbitPw9")
	for _, s := range []string{"NatsPw12", "TokenAbc123", "RabbitPw9"} {
		if strings.Contains(out, s) {
			t.Errorf("%q still in %q", s, out)
		}
	}
}
