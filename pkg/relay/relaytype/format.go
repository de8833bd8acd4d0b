package relaytype

// TableFormat names the column layout of the outbox table
// (relay.Config.TableFormat): which column holds each field of an event.
// The decoder is the same for every format; only this mapping differs.
type TableFormat string

const (
	// TableFormatPgoutbox is pgoutbox's own table (sql/outbox): id,
	// aggregate_type, aggregate_id, event_type, business_key, payload,
	// headers, topic, created_at. The default.
	TableFormatPgoutbox TableFormat = "pgoutbox"
	// TableFormatDebezium is the table of Debezium's Outbox Event Router in
	// its default configuration: id, aggregatetype, aggregateid, type,
	// payload (nullable), and optionally timestamp and tracingspancontext.
	// It has no business key: the message ID serves as one. Records carry
	// the headers the router writes ("id", and "type" as
	// table.fields.additional.placement=type:header does) besides the
	// contract headers, and go by default to "outbox.event.{aggregate_type}".
	TableFormatDebezium TableFormat = "debezium"
)

// TableFormats lists the formats, the default first.
var TableFormats = []TableFormat{TableFormatPgoutbox, TableFormatDebezium}

// Default topic templates of the table formats (relay.Config.TopicTemplate).
const (
	DefaultTopicTemplate         = "outbox.{aggregate_type}"
	DefaultDebeziumTopicTemplate = "outbox.event.{aggregate_type}"
)
