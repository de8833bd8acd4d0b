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
