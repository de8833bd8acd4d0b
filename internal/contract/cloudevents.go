package contract

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
)
