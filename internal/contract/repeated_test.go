package contract

import "testing"

func TestRepeatedReserved(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{"message-id", "business-key", "event-type", "aggregate-type", "aggregate-id", "traceparent"}, ""},
		{[]string{"x", "x", "traceparent", "traceparent"}, ""}, // only the contract's own headers
		{[]string{"message-id", "business-key", "message-id"}, "message-id"},
		{[]string{"business-key", "Business-Key"}, "business-key"},
		{[]string{"aggregate-id", "event-type", "EVENT-TYPE"}, "event-type"},
		{[]string{"aggregate-type", "aggregate-type"}, "aggregate-type"},
	} {
		if got := RepeatedReserved(tc.names); got != tc.want {
			t.Errorf("RepeatedReserved(%q) = %q, want %q", tc.names, got, tc.want)
		}
	}
}
