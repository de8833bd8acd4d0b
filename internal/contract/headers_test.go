package contract_test

import (
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/contract"
)

// Reserved names the contract headers a row may not set (exact,
// lower-case names); WrittenByRelay every header the relay writes itself,
// whatever the case, the dead-letter ones (dlq-*) included.
func TestHeaderNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                     string
		reserved, writtenByRelay bool
	}{
		{"message-id", true, true}, {"business-key", true, true}, {"event-type", true, true},
		{"aggregate-type", true, true}, {"aggregate-id", true, true},
		{"Message-Id", false, true}, {"Message-ID", false, true}, {"original-topic", false, true}, {"ORIGINAL-TOPIC", false, true},
		{"relay-instance", false, true}, {"dlq-reason", false, true}, {"dlq-anything", false, true}, {"DLQ-Detail", false, true}, {"dlq-", false, true},
		{"traceparent", false, false}, {"tracestate", false, false}, {"dlq", false, false}, {"original-topics", false, false},
		{"correlation-id", false, false}, {"", false, false},
	} {
		if got := contract.Reserved(tc.name); got != tc.reserved {
			t.Errorf("Reserved(%q) = %v, want %v", tc.name, got, tc.reserved)
		}
		if got := contract.WrittenByRelay(tc.name); got != tc.writtenByRelay {
			t.Errorf("WrittenByRelay(%q) = %v, want %v", tc.name, got, tc.writtenByRelay)
		}
	}
}
