package relay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/kafkasasl"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// A client of KafkaClientOpts whose SASL configuration does not build
// (PLAIN without a user name) never reaches a broker without SASL: every
// dial fails with the SASL error. It used to leave SASL out and connect.
func TestClientOptsFailClosedOnBadSASL(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t)
	cl, err := kgo.NewClient(relay.KafkaClientOpts(&relay.Config{Kafka: relay.KafkaConfig{Brokers: k.Brokers, SASL: &kafkasasl.Config{Mechanism: "PLAIN"}}})...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = cl.Ping(ctx)
	if err == nil || !strings.Contains(err.Error(), "SASL PLAIN needs a username") {
		t.Fatalf("Ping: %v, want the SASL error", err)
	}
}
