package tableformat

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Debezium's record header names (its EventRouter: the event ID under
// "id"; the type column under its own name when placed as a header).
const (
	DebeziumHeaderID   = "id"
	DebeziumHeaderType = "type"
)

// Column is where a TableShape finds one field of an event, and what it
// accepts there.
type Column struct {
	// Name is the column in the table; "" when the format has none.
	Name string
	// Required: a table of the format must have it.
	Required bool
	// Types are the type OIDs the relay reads it as.
	Types []uint32
}

// Fields of an event, the index of a column in TableShape.Columns and of
// its position in a layout.
const (
	ColID = iota
	ColAggregateType
	ColAggregateID
	ColEventType
	ColBusinessKey
	ColPayload
	ColHeaders
	ColTopic
	ColTracing // Debezium's tracingspancontext
	NumColumns
)

// TableShape is one TableFormat: the column of each field and the types
// the relay accepts for it.
type TableShape struct {
	Columns [NumColumns]Column
	// CreatedAt is the column backfill and prune select rows by; "" when
	// the format has none. Optional in the table when not createdAtRequired.
	CreatedAt         string
	createdAtRequired bool
	// TopicTemplate is the default Config.TopicTemplate.
	TopicTemplate string
	// CreatesTable: relay setup creates the outbox table (with its state
	// table); otherwise the table must exist, setup checks its shape and
	// creates only the state table.
	CreatesTable bool
	// RouterHeaders adds the headers Debezium's router writes (IDHeader,
	// and the event type under DebeziumHeaderType).
	RouterHeaders bool
	// IDHeader is the header in which the format's former publisher (a
	// Debezium router) names the row, for verify to match records
	// published before the switch to the relay; "" when none.
	IDHeader string
}

// IDIsBusinessKey reports whether the message ID doubles as the business
// key: the format has no business-key column.
func (s *TableShape) IDIsBusinessKey() bool { return s.Columns[ColBusinessKey].Name == "" }

// FormatList is the formats as a user types them, the default first:
// "pgoutbox, debezium".
func FormatList() string {
	names := make([]string, len(relaytype.TableFormats))
	for i, f := range relaytype.TableFormats {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

var (
	idTypes      = []uint32{OIDUUID, OIDText, OIDVarchar}
	textTypes    = []uint32{OIDText, OIDVarchar}
	payloadTypes = []uint32{OIDJSONB, OIDJSON, OIDText, OIDVarchar, OIDBytea}
)

// TableShapes maps each TableFormat to its columns: the one table of which
// column means what.
var TableShapes = map[relaytype.TableFormat]*TableShape{
	relaytype.TableFormatPgoutbox: {
		Columns: [NumColumns]Column{
			ColID:            {"id", true, idTypes},
			ColAggregateType: {"aggregate_type", true, textTypes},
			ColAggregateID:   {"aggregate_id", true, textTypes},
			ColEventType:     {"event_type", true, textTypes},
			ColBusinessKey:   {"business_key", true, textTypes},
			ColPayload:       {"payload", true, payloadTypes},
			ColHeaders:       {"headers", false, []uint32{OIDJSONB, OIDJSON}},
			ColTopic:         {"topic", false, textTypes},
		},
		CreatedAt:         "created_at",
		createdAtRequired: true,
		TopicTemplate:     relaytype.DefaultTopicTemplate,
		CreatesTable:      true,
	},
	relaytype.TableFormatDebezium: {
		Columns: [NumColumns]Column{
			ColID:            {"id", true, idTypes},
			ColAggregateType: {"aggregatetype", true, textTypes},
			ColAggregateID:   {"aggregateid", true, textTypes},
			ColEventType:     {"type", true, textTypes},
			// A NULL payload is a record with a null value, as the
			// router writes it.
			ColPayload: {"payload", false, payloadTypes},
			ColTracing: {"tracingspancontext", false, textTypes},
		},
		CreatedAt:     "timestamp",
		TopicTemplate: relaytype.DefaultDebeziumTopicTemplate,
		RouterHeaders: true,
		IDHeader:      DebeziumHeaderID,
	},
}

// Shape is the TableShape of f; the default's for "".
func Shape(f relaytype.TableFormat) *TableShape {
	if s, ok := TableShapes[f]; ok {
		return s
	}
	return TableShapes[relaytype.TableFormatPgoutbox]
}

// HasColumn reports whether names holds name.
func HasColumn(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// CheckShape names the table's format when its columns are those of
// another format than f, for the error of a table of the wrong shape ("" if
// none fits better).
func CheckShape(f relaytype.TableFormat, names []string) string {
	for _, other := range relaytype.TableFormats {
		if other == f {
			continue
		}
		fits := true
		for _, c := range Shape(other).Columns {
			if c.Required && !HasColumn(names, c.Name) {
				fits = false
			}
		}
		if fits {
			return fmt.Sprintf(" (its columns are those of table format %s: pass --table-format %s)", other, other)
		}
	}
	return ""
}

// TraceHeaders reads the W3C trace context out of a Debezium
// tracingspancontext value: the span context serialized as
// java.util.Properties text ("traceparent=00-…" lines, "#" comments).
// Other keys are left out.
func TraceHeaders(text []byte) map[string]string {
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
	OIDBytea   = 17
	OIDText    = 25
	OIDJSON    = 114
	OIDVarchar = 1043
	OIDUUID    = 2950
	OIDJSONB   = 3802
)

// DefaultCloudEventsSource is Config.CloudEventsSource's default:
// /pgoutbox/DATABASE/SCHEMA.TABLE, path-escaped. Nothing of the URL but the
// database name appears in it.
func DefaultCloudEventsSource(databaseURL, tableName string) string {
	db := ""
	if pg, err := pgconn.ParseConfig(databaseURL); err == nil {
		db = pg.Database
	}
	table, _ := pgname.Parse(tableName, "public")
	return "/pgoutbox/" + url.PathEscape(db) + "/" + url.PathEscape(table.Schema+"."+table.Name)
}
