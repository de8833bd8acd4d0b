package contract

import "strings"

// RepeatedReserved returns the first Reserved header (message-id,
// business-key, event-type, aggregate-type, aggregate-id) that names holds
// more than once, ignoring case, or "" when none is repeated. A record that
// repeats one is ambiguous: one reader keeps the first copy, another the
// last, another ignores case, so a forged second message-id or business-key
// could change what a consumer deduplicates on. Such a record is invalid.
func RepeatedReserved(names []string) string {
	return repeated(names, HeaderMessageID, HeaderBusinessKey, HeaderEventType, HeaderAggregateType, HeaderAggregateID)
}

// RepeatedCloudEvents is RepeatedReserved for the CloudEvents headers the
// inbox reads a record by (ce_id, ce_businesskey, ce_type).
func RepeatedCloudEvents(names []string) string {
	return repeated(names, HeaderCEID, HeaderCEBusinessKey, HeaderCEType)
}

// repeated returns the first of reserved (at most 8) that names holds more
// than once, ignoring case, or "".
func repeated(names []string, reserved ...string) string {
	var seen [8]bool
	for _, n := range names {
		for i, h := range reserved {
			if !strings.EqualFold(n, h) {
				continue
			}
			if seen[i] {
				return h
			}
			seen[i] = true
		}
	}
	return ""
}
