package relay

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
)

// TableFormat names the column layout of the outbox table: which column
// holds each field of an event. The decoder is the same for every format;
// only this mapping differs.
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

// Debezium's record header names (its EventRouter: the event ID under
// "id"; the type column under its own name when placed as a header).
const (
	debeziumHeaderID   = "id"
	debeziumHeaderType = "type"
)

type column struct {
	// name is the column in the table; "" when the format has none.
	name     string
	required bool
	types    []uint32
}

// Fields of an event, the index of a column in tableShape.columns and of
// its position in a layout.
const (
	colID = iota
	colAggregateType
	colAggregateID
	colEventType
	colBusinessKey
	colPayload
	colHeaders
	colTopic
	colTracing // Debezium's tracingspancontext
	numColumns
)

// tableShape is one TableFormat: the column of each field and the types
// the relay accepts for it.
type tableShape struct {
	columns [numColumns]column
	// createdAt is the column backfill and prune select rows by; "" when
	// the format has none. Optional in the table when not createdAtRequired.
	createdAt         string
	createdAtRequired bool
	// topicTemplate is the default Config.TopicTemplate.
	topicTemplate string
	// debeziumHeaders adds the headers Debezium's router writes.
	debeziumHeaders bool
}

var (
	idTypes      = []uint32{oidUUID, oidText, oidVarchar}
	textTypes    = []uint32{oidText, oidVarchar}
	payloadTypes = []uint32{oidJSONB, oidJSON, oidText, oidVarchar, oidBytea}
)

// tableShapes maps each TableFormat to its columns: the one table of which
// column means what.
var tableShapes = map[TableFormat]*tableShape{
	TableFormatPgoutbox: {
		columns: [numColumns]column{
			colID:            {"id", true, idTypes},
			colAggregateType: {"aggregate_type", true, textTypes},
			colAggregateID:   {"aggregate_id", true, textTypes},
			colEventType:     {"event_type", true, textTypes},
			colBusinessKey:   {"business_key", true, textTypes},
			colPayload:       {"payload", true, payloadTypes},
			colHeaders:       {"headers", false, []uint32{oidJSONB, oidJSON}},
			colTopic:         {"topic", false, textTypes},
		},
		createdAt:         "created_at",
		createdAtRequired: true,
		topicTemplate:     DefaultTopicTemplate,
	},
	TableFormatDebezium: {
		columns: [numColumns]column{
			colID:            {"id", true, idTypes},
			colAggregateType: {"aggregatetype", true, textTypes},
			colAggregateID:   {"aggregateid", true, textTypes},
			colEventType:     {"type", true, textTypes},
			// A NULL payload is a record with a null value, as the
			// router writes it.
			colPayload: {"payload", false, payloadTypes},
			colTracing: {"tracingspancontext", false, textTypes},
		},
		createdAt:       "timestamp",
		topicTemplate:   DefaultDebeziumTopicTemplate,
		debeziumHeaders: true,
	},
}

// shape is the tableShape of f; the default's for "".
func shape(f TableFormat) *tableShape {
	if s, ok := tableShapes[f]; ok {
		return s
	}
	return tableShapes[TableFormatPgoutbox]
}

// hasColumn reports whether names holds name.
func hasColumn(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// checkShape names the table's format when its columns are those of
// another format than f, for the error of a table of the wrong shape ("" if
// none fits better).
func checkShape(f TableFormat, names []string) string {
	for _, other := range TableFormats {
		if other == f {
			continue
		}
		fits := true
		for _, c := range shape(other).columns {
			if c.required && !hasColumn(names, c.name) {
				fits = false
			}
		}
		if fits {
			return fmt.Sprintf(" (its columns are those of table format %s: pass --table-format %s)", other, other)
		}
	}
	return ""
}

// traceHeaders reads the W3C trace context out of a Debezium
// tracingspancontext value: the span context serialized as
// java.util.Properties text ("traceparent=00-…" lines, "#" comments).
// Other keys are left out.
func traceHeaders(text []byte) map[string]string {
	var out map[string]string
	for _, line := range bytes.Split(text, []byte("\n")) {
		k, v, ok := strings.Cut(strings.TrimSpace(string(line)), "=")
		if !ok || strings.HasPrefix(k, "#") || strings.HasPrefix(k, "!") {
			continue
		}
		k = strings.TrimSpace(k)
		if k == "traceparent" || k == "tracestate" {
			if out == nil {
				out = make(map[string]string, 2)
			}
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// Column type OIDs the relay reads.
const (
	oidBytea   = 17
	oidText    = 25
	oidJSON    = 114
	oidVarchar = 1043
	oidUUID    = 2950
	oidJSONB   = 3802
)

// Default topic templates of the table formats.
const (
	DefaultTopicTemplate         = "outbox.{aggregate_type}"
	DefaultDebeziumTopicTemplate = "outbox.event.{aggregate_type}"
)

// defaultCloudEventsSource is Config.CloudEventsSource's default:
// /pgoutbox/DATABASE/SCHEMA.TABLE, path-escaped. Nothing of the URL but the
// database name appears in it.
func defaultCloudEventsSource(databaseURL, tableName string) string {
	db := ""
	if pg, err := pgconn.ParseConfig(databaseURL); err == nil {
		db = pg.Database
	}
	table, _ := pgname.Parse(tableName, "public")
	return "/pgoutbox/" + url.PathEscape(db) + "/" + url.PathEscape(table.Schema+"."+table.Name)
}
