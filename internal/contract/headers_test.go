package contract_test

import (
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/contract"
)

func TestReserved(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"message-id", true}, {"business-key", true}, {"event-type", true}, {"aggregate-type", true}, {"aggregate-id", true},
		{"traceparent", false}, {"tracestate", false}, {"dlq-reason", false}, {"Message-Id", false}, {"", false},
	} {
		if got := contract.Reserved(tc.name); got != tc.want {
			t.Errorf("Reserved(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestWrittenByRelay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"message-id", true}, {"Message-ID", true}, {"aggregate-id", true}, {"original-topic", true}, {"ORIGINAL-TOPIC", true},
		{"relay-instance", true}, {"dlq-reason", true}, {"dlq-anything", true}, {"DLQ-Detail", true}, {"dlq-", true},
		{"traceparent", false}, {"tracestate", false}, {"dlq", false}, {"original-topics", false}, {"", false}, {"correlation-id", false},
	} {
		if got := contract.WrittenByRelay(tc.name); got != tc.want {
			t.Errorf("WrittenByRelay(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
