package inbox_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
)

// A consumer started before its topic exists consumes the topic once a
// producer creates it (auto-creation), and its metadata requests do not
// create the topic. kafka-go's reader did not on Apache Kafka: its group
// leader assigned nothing and never rejoined (docs/kafka.md).
func TestConsumerJoinsBeforeItsTopicExists(t *testing.T) {
	t.Parallel()
	k := testenv.NewBroker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	topic, group := k.Topic("appears-later"), k.Topic("appears-later-group")
	b := setup(t, nil)
	rc := startConsumer(t, &inboxkafka.Config[pgx.Tx]{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.in, MaxWait: testMaxWait,
		SessionTimeout: time.Second, Handler: insertEffect, MetricsInterval: -1,
	})
	// kgo joins the group once the topic exists (a metadata answer lists
	// it), so no group of one member assigned nothing stays stable as
	// kafka-go's did; give the consumer time to ask for the topic first.
	time.Sleep(2 * time.Second)
	if k.TopicExists(t, topic) {
		t.Fatalf("topic %s exists before the first record", topic)
	}
	produce(t, k.Brokers, topic, rec{ID: "m-1", Key: "k-1", Value: `{}`})
	rc.waitOffsets(t, map[int]int64{0: 1})
	rc.stop(t)
	wantEffectOnce(t, b.db, "k-1")
}
