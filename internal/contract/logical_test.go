package contract

import (
	"errors"
	"reflect"
	"testing"

	"github.com/google/uuid"
)

func TestLogicalMessageRoundTrip(t *testing.T) {
	e := Event{ID: uuid.MustParse("0190f0e0-0000-7000-8000-000000000001"), AggregateType: "order", AggregateID: "o-1",
		EventType: "order.placed", BusinessKey: "k-1", Payload: []byte{0, 0xff, '{'}, Headers: map[string]string{"traceparent": "00-x"}, Topic: "orders.v1"}
	content, err := EncodeLogicalMessage(&e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeLogicalMessage(content)
	if err != nil || !reflect.DeepEqual(got, e) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, e)
	}
}

func TestDecodeLogicalMessageRejects(t *testing.T) {
	for _, content := range []string{
		``, `[]`, `{"v":2,"id":"0190f0e0-0000-7000-8000-000000000001"}`,
		`{"v":1,"aggregate_type":"a","aggregate_id":"1","event_type":"e","business_key":"k","payload":"e30="}`,
		`{"v":1,"id":"0190f0e0-0000-7000-8000-000000000001","aggregate_id":"1","event_type":"e","business_key":"k","payload":"e30="}`,
		`{"v":1,"id":"0190f0e0-0000-7000-8000-000000000001","aggregate_type":"a","aggregate_id":"1","event_type":"e","business_key":"k","payload":"%%"}`,
	} {
		if _, err := DecodeLogicalMessage([]byte(content)); !errors.Is(err, ErrBadLogicalMessage) {
			t.Errorf("DecodeLogicalMessage(%q): %v, want ErrBadLogicalMessage", content, err)
		}
	}
}

// Whatever the content, DecodeLogicalMessage returns an error or an event
// that encodes back to content it decodes to the same event.
func FuzzDecodeLogicalMessage(f *testing.F) {
	f.Add([]byte(`{"v":1,"id":"0190f0e0-0000-7000-8000-000000000001","aggregate_type":"a","aggregate_id":"1","event_type":"e","business_key":"k","payload":"e30=","headers":{"x":"y"},"topic":"t"}`))
	f.Add([]byte(`{"v":1,"id":"0190f0e0-0000-7000-8000-000000000001","aggregate_type":"a","aggregate_id":"1","event_type":"e","business_key":"k","payload":""}`))
	f.Add([]byte(`{"v":2}`))
	f.Fuzz(func(t *testing.T, content []byte) {
		e, err := DecodeLogicalMessage(content)
		if err != nil {
			if !errors.Is(err, ErrBadLogicalMessage) {
				t.Fatalf("error %v does not wrap ErrBadLogicalMessage", err)
			}
			return
		}
		again, err := EncodeLogicalMessage(&e)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeLogicalMessage(again)
		if len(back.Headers) == 0 && len(e.Headers) == 0 { // "headers":{} and none are alike
			back.Headers, e.Headers = nil, nil
		}
		if err != nil || !reflect.DeepEqual(back, e) {
			t.Fatalf("re-encoded %s decodes to %+v, %v; want %+v", again, back, err, e)
		}
	})
}
