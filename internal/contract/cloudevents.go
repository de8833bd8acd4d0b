package contract

import "strings"

// CloudEvents attributes as headers of the Kafka protocol binding's binary
// content mode (https://github.com/cloudevents/spec, kafka-protocol-binding):
// "ce_" and the attribute name. The inbox reads a record without a
// message-id header by them; HeaderCEBusinessKey is pgoutbox's extension
// attribute "businesskey" (extension names are lower-case letters and
// digits only).
const (
	HeaderCEID          = "ce_id"
	HeaderCEType        = "ce_type"
	HeaderCESource      = "ce_source"
	HeaderCESpecVersion = "ce_specversion"
	HeaderCETime        = "ce_time"
	HeaderCESubject     = "ce_subject"
	HeaderCEBusinessKey = "ce_businesskey"
	// HeaderCETraceparent and HeaderCETracestate are the distributed
	// tracing extension's attributes: the row's W3C trace context.
	HeaderCETraceparent = "ce_traceparent"
	HeaderCETracestate  = "ce_tracestate"
	// HeaderContentType is the binding's datacontenttype: the
	// content-type header, no "ce_" prefix.
	HeaderContentType = "content-type"
)

// CloudEventsSpecVersion is the ce_specversion the relay writes.
const CloudEventsSpecVersion = "1.0"

// ceprefix starts every CloudEvents attribute header.
const ceprefix = "ce_"

// CloudEventsHeader reports whether name is a CloudEvents attribute header
// (ce_*) or content-type, case ignored: headers the relay writes itself when
// it writes CloudEvents, which a row may then not name.
func CloudEventsHeader(name string) bool {
	return len(name) >= len(ceprefix) && strings.EqualFold(name[:len(ceprefix)], ceprefix) ||
		strings.EqualFold(name, HeaderContentType)
}
