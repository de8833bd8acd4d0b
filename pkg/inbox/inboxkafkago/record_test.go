package inboxkafkago_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/goleak"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafkago"
)

func TestMain(m *testing.M) {
	// DATABASE_URL for the example; kafka-go keeps one process-wide
	// goroutine that expires cached connections of its default Transport.
	testenv.MainWithDatabase(m, goleak.IgnoreTopFunction("github.com/segmentio/kafka-go.(*connPool).discover"))
}

// Record carries every field and header, in order, repeated ones too (the
// inbox refuses a repeated contract header), and reports transaction
// markers, which kafka-go hands out as records.
func TestRecord(t *testing.T) {
	at := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	m := kafka.Message{Topic: "outbox.order", Partition: 3, Offset: 42, Key: []byte("o-1"), Value: []byte(`{}`), Time: at,
		Headers: []kafka.Header{{Key: "message-id", Value: []byte("m-1")}, {Key: "business-key", Value: []byte("k-1")},
			{Key: "message-id", Value: []byte("m-2")}}}
	got, ok := inboxkafkago.Record(m)
	want := inbox.KafkaRecord{Topic: "outbox.order", Partition: 3, Offset: 42, Key: []byte("o-1"), Value: []byte(`{}`), Time: at,
		Headers: []inbox.KafkaHeader{{Key: "message-id", Value: []byte("m-1")}, {Key: "business-key", Value: []byte("k-1")},
			{Key: "message-id", Value: []byte("m-2")}}}
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("Record = %+v, %v; want %+v, true", got, ok, want)
	}

	for _, tc := range []struct {
		name   string
		m      kafka.Message
		marker bool
	}{
		{"commit marker", kafka.Message{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 7}}, true},
		{"abort marker", kafka.Message{Key: []byte{0, 0, 0, 0}, Value: []byte{0, 0, 0, 0, 0, 7}}, true},
		{"headers", kafka.Message{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 7},
			Headers: []kafka.Header{{Key: "message-id", Value: []byte("m-1")}}}, false},
		{"another key", kafka.Message{Key: []byte{0, 0, 0, 2}, Value: []byte{0, 0, 0, 0, 0, 7}}, false},
		{"another value", kafka.Message{Key: []byte{0, 0, 0, 1}, Value: []byte(`{"a":1}`)}, false},
	} {
		if _, ok := inboxkafkago.Record(tc.m); ok == tc.marker {
			t.Errorf("%s: Record ok = %v, want %v", tc.name, ok, !tc.marker)
		}
	}
}
