package relay

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/segmentio/kafka-go"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// Reasons of invalid events: the dlq-reason header and the reason label of
// pgoutbox_relay_invalid_events_total.
const (
	ReasonNullColumn      = "null-column"      // NULL in a required column
	ReasonBadValue        = "bad-value"        // a value that does not parse (message ID, bytea)
	ReasonTooLarge        = "too-large"        // record over MaxMessageBytes or the broker's limit
	ReasonUnsupportedType = "unsupported-type" // a column value in a form the relay cannot read
	ReasonBadHeaders      = "bad-headers"      // headers not a JSON object
	ReasonBadTopic        = "bad-topic"        // topic not a legal Kafka topic name
	ReasonBadMessage      = "bad-message"      // a pgoutbox logical message that does not parse
	ReasonKafkaRejected   = "kafka-rejected"   // a record the brokers refuse for good (unknown topic, policy...)
	ReasonBadColumns      = "bad-columns"      // a row of a table layout (relation message) the relay cannot read
	ReasonNotOutbox       = "not-outbox"       // a row of a table the publication publishes that is not the outbox
	ReasonInvalidKey      = "invalid-key"      // a business key that breaks the key rules (internal/contract)
)

// Column type OIDs the relay reads.
const (
	oidBytea   = 17
	oidText    = 25
	oidJSON    = 114
	oidVarchar = 1043
	oidUUID    = 2950
	oidJSONB   = 3802
)

type column struct {
	name     string
	required bool
	types    []uint32
}

// outboxColumns are the columns the relay reads, with the types it accepts.
var outboxColumns = []column{
	{"id", true, []uint32{oidUUID, oidText, oidVarchar}},
	{"aggregate_type", true, []uint32{oidText, oidVarchar}},
	{"aggregate_id", true, []uint32{oidText, oidVarchar}},
	{"event_type", true, []uint32{oidText, oidVarchar}},
	{"business_key", true, []uint32{oidText, oidVarchar}},
	{"payload", true, []uint32{oidJSONB, oidJSON, oidText, oidVarchar, oidBytea}},
	{"headers", false, []uint32{oidJSONB, oidJSON}},
	{"topic", false, []uint32{oidText, oidVarchar}},
}

const (
	colID = iota
	colAggregateType
	colAggregateID
	colEventType
	colBusinessKey
	colPayload
	colHeaders
	colTopic
	numColumns
)

// layout maps outboxColumns to positions in a tuple; -1 is absent.
type layout struct {
	pos          [numColumns]int
	byteaPayload bool
	// problem, when not empty, says why the relay cannot read rows of
	// this layout (checkColumns' error): they are invalid (bad-columns).
	problem string
}

// typeNames names the OIDs in error messages.
var typeNames = map[uint32]string{oidBytea: "bytea", oidText: "text", oidJSON: "json", oidVarchar: "varchar", oidUUID: "uuid", oidJSONB: "jsonb",
	16: "boolean", 18: "char", 19: "name", 20: "bigint", 21: "smallint", 23: "integer", 1042: "character", 1114: "timestamp",
	1184: "timestamptz", 1700: "numeric"}

// checkColumns builds the layout of a table given its column names and type
// OIDs, or an error wrapping ErrTableColumns naming every problem.
func checkColumns(table string, names []string, types []uint32) (layout, error) {
	var l layout
	var problems []string
	for i, want := range outboxColumns {
		l.pos[i] = -1
		for j, name := range names {
			if name == want.name {
				l.pos[i] = j
			}
		}
		if l.pos[i] < 0 {
			if want.required {
				problems = append(problems, "missing column "+want.name)
			}
			continue
		}
		got := types[l.pos[i]]
		ok := false
		var accepted []string
		for _, t := range want.types {
			ok = ok || t == got
			accepted = append(accepted, typeNames[t])
		}
		if !ok {
			name := typeNames[got]
			if name == "" {
				name = fmt.Sprintf("type OID %d", got)
			}
			problems = append(problems, fmt.Sprintf("column %s is %s, want %s", want.name, name, strings.Join(accepted, " or ")))
		}
		if i == colPayload && got == oidBytea {
			l.byteaPayload = true
		}
	}
	if len(problems) > 0 {
		return l, fmt.Errorf("%w: %s: %s", ErrTableColumns, table, strings.Join(problems, "; "))
	}
	return l, nil
}

// event is one record to publish: a valid record for its topic, or an
// invalid row (invalid != nil) that becomes a dead-letter record.
type event struct {
	msg     kafka.Message
	id      uuid.UUID
	invalid *InvalidEventError
	// slim marks a dead-letter record reduced to the headers that always
	// fit (see slimDeadLetter).
	slim bool
	// tx and commit are set by the reader.
	tx     acktrack.TxID
	commit time.Time
	// cost is what the event took from the buffer budget; the sink gives
	// it back once Kafka acknowledged the event.
	cost int64
}

// walKind says what one pgoutput message meant to the relay.
type walKind int

const (
	walNone   walKind = iota // nothing to do (other tables, types, origins...)
	walBegin                 // a transaction starts
	walCommit                // it ends at endLSN
	walEvent                 // an outbox event of the current transaction
)

type walItem struct {
	kind       walKind
	commitTime time.Time
	endLSN     pglogrepl.LSN
	ev         event
}

// relation is a cached relation message: the outbox (or a partition of
// it, or the outbox under a former name) with its layout, or a foreign
// table of the publication.
type relation struct {
	layout
	// foreign names a table that is not the outbox; empty for the outbox.
	foreign string
	// names are the columns, for the dead-letter value of a foreign row.
	names []string
	// warned is set once a foreign row was logged.
	warned bool
}

// relationResolver says whether a relation message is the outbox's. The
// session's catalog answers by OID (see catalog.resolve); tests use a fixed
// set.
type relationResolver interface {
	isOutbox(m *pglogrepl.RelationMessage) (bool, error)
}

// decoder turns pgoutput (proto_version 1) messages into walItems. It keeps
// the relation cache; it is not safe for concurrent use.
type decoder struct {
	table           pgname.Table
	topicTemplate   string
	maxMessageBytes int
	resolve         relationResolver
	relations       map[uint32]*relation
	commitTime      time.Time
	// stopOnInvalid makes an unusable layout an error (ErrTableColumns)
	// rather than a layout whose rows are invalid.
	stopOnInvalid bool
	logger        *slog.Logger
	// messages is set once a pgoutbox logical message was decoded (the
	// relay state records it: a backfill cannot recover those).
	messages bool
}

func newDecoder(c *Config, res relationResolver) *decoder {
	table, _ := pgname.Parse(c.Table, "public")
	return &decoder{
		table:           table,
		topicTemplate:   c.TopicTemplate,
		maxMessageBytes: c.MaxMessageBytes,
		resolve:         res,
		relations:       make(map[uint32]*relation),
		stopOnInvalid:   c.OnInvalid == InvalidStop,
		logger:          c.Logger,
	}
}

// errProtocol wraps messages that are not valid pgoutput.
var errProtocol = errors.New("relay: unexpected replication data")

// decode interprets one XLogData payload.
func (d *decoder) decode(data []byte) (walItem, error) {
	if len(data) == 0 {
		return walItem{}, fmt.Errorf("%w: empty message", errProtocol)
	}
	msg, err := parsePgoutput(data)
	if err != nil {
		return walItem{}, err
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		// Matched by OID through the catalog, not by the name in the
		// message: a partition, a renamed or a replaced outbox carry
		// other names, and a table that is not the outbox is never
		// skipped silently.
		outbox, err := d.resolve.isOutbox(m)
		if err != nil {
			return walItem{}, err
		}
		names := make([]string, len(m.Columns))
		types := make([]uint32, len(m.Columns))
		for i, c := range m.Columns {
			names[i], types[i] = c.Name, c.DataType
		}
		if !outbox {
			d.relations[m.RelationID] = &relation{foreign: pgname.Table{Schema: m.Namespace, Name: m.RelationName}.String(), names: names}
			return walItem{}, nil
		}
		l, err := checkColumns(d.table.String(), names, types)
		if err != nil {
			if d.stopOnInvalid {
				return walItem{}, err
			}
			// The table changed while streaming (or did, in the WAL
			// being replayed): its rows go to the dead-letter topic
			// until the next relation message, rather than stalling
			// the relay on WAL that can never be read otherwise.
			l.problem = err.Error()
			if d.logger != nil {
				d.logger.Warn("the outbox table's columns changed to a layout the relay cannot read; its rows go to the dead-letter topic",
					"error", err)
			}
		}
		d.relations[m.RelationID] = &relation{layout: l, names: names}
		return walItem{}, nil
	case *pglogrepl.BeginMessage:
		d.commitTime = m.CommitTime
		return walItem{kind: walBegin, commitTime: m.CommitTime}, nil
	case *pglogrepl.CommitMessage:
		return walItem{kind: walCommit, commitTime: m.CommitTime, endLSN: m.TransactionEndLSN}, nil
	case *pglogrepl.InsertMessage:
		r, known := d.relations[m.RelationID]
		if !known {
			return walItem{}, fmt.Errorf("%w: insert into relation %d before its relation message", errProtocol, m.RelationID)
		}
		if m.Tuple == nil {
			return walItem{}, fmt.Errorf("%w: insert without a tuple", errProtocol)
		}
		if r.foreign != "" {
			if !r.warned && d.logger != nil {
				r.warned = true
				d.logger.Warn("a table in the publication is not the outbox; its rows are invalid (reason not-outbox)",
					"table", r.foreign, "oid", m.RelationID)
			}
			return walItem{kind: walEvent, ev: d.foreignEvent(r, m.Tuple.Columns)}, nil
		}
		return walItem{kind: walEvent, ev: d.rowEvent(&r.layout, m.Tuple.Columns)}, nil
	case *pglogrepl.LogicalDecodingMessage:
		if m.Prefix != outbox.LogicalMessagePrefix || !m.Transactional {
			return walItem{}, nil
		}
		d.messages = true
		return walItem{kind: walEvent, ev: d.messageEvent(m.Content)}, nil
	}
	return walItem{}, nil
}

// parsePgoutput is pglogrepl.Parse, which indexes past the end of some
// malformed messages (found by FuzzDecode): a panic there is a protocol
// error, not a crash.
func parsePgoutput(data []byte) (msg pglogrepl.Message, err error) {
	defer func() {
		if p := recover(); p != nil {
			msg, err = nil, fmt.Errorf("%w: malformed %q message: %v", errProtocol, data[0], p)
		}
	}()
	msg, err = pglogrepl.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errProtocol, err)
	}
	return msg, nil
}

// rowEvent builds the event of one inserted outbox row.
func (d *decoder) rowEvent(l *layout, cols []*pglogrepl.TupleDataColumn) event {
	var (
		vals    [numColumns][]byte
		present [numColumns]bool
		ev      event
	)
	var problem *InvalidEventError
	fail := func(reason, format string, args ...any) {
		if problem == nil {
			problem = &InvalidEventError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
		}
	}
	if l.problem != "" {
		fail(ReasonBadColumns, "%s", l.problem)
	}
	for i, pos := range l.pos {
		if pos < 0 {
			continue
		}
		if pos >= len(cols) || cols[pos] == nil {
			fail(ReasonUnsupportedType, "column %s missing from the row", outboxColumns[i].name)
			continue
		}
		switch c := cols[pos]; c.DataType {
		case pglogrepl.TupleDataTypeNull:
			if outboxColumns[i].required {
				fail(ReasonNullColumn, "column %s is NULL", outboxColumns[i].name)
			}
		case pglogrepl.TupleDataTypeText:
			vals[i], present[i] = c.Data, true
		default:
			fail(ReasonUnsupportedType, "column %s sent as %q, want text", outboxColumns[i].name, c.DataType)
		}
	}
	if present[colID] {
		id, err := uuid.ParseBytes(vals[colID])
		if err != nil {
			fail(ReasonBadValue, "message ID %q is not a UUID", truncate(vals[colID]))
		}
		ev.id = id
	}
	payload := vals[colPayload]
	if present[colPayload] && l.byteaPayload {
		raw, err := decodeBytea(payload)
		if err != nil {
			fail(ReasonBadValue, "payload: %v", err)
		}
		payload = raw
	}
	var headers map[string]string
	if present[colHeaders] {
		var err error
		if headers, err = parseHeaders(vals[colHeaders]); err != nil {
			fail(ReasonBadHeaders, "headers: %v", err)
		}
	}
	m := outbox.Message{
		ID: ev.id, AggregateType: string(vals[colAggregateType]), AggregateID: string(vals[colAggregateID]),
		EventType: string(vals[colEventType]), BusinessKey: string(vals[colBusinessKey]), Payload: payload,
		Headers: headers, Topic: string(vals[colTopic]),
	}
	return d.finish(ev, &m, problem)
}

// foreignEvent builds the invalid event (reason not-outbox) of a row of a
// table the publication publishes that is not the outbox: its value is the
// row as a JSON object of column texts (null for NULL), so nothing is lost.
func (d *decoder) foreignEvent(r *relation, cols []*pglogrepl.TupleDataColumn) event {
	var b strings.Builder
	b.WriteByte('{')
	for i, c := range cols {
		if i > 0 {
			b.WriteByte(',')
		}
		name := fmt.Sprintf("column%d", i+1)
		if i < len(r.names) {
			name = r.names[i]
		}
		k, _ := json.Marshal(name)
		b.Write(k)
		b.WriteByte(':')
		if c == nil || c.DataType != pglogrepl.TupleDataTypeText {
			b.WriteString("null")
			continue
		}
		v, _ := json.Marshal(string(c.Data))
		b.Write(v)
	}
	b.WriteByte('}')
	return event{
		msg: kafka.Message{Value: []byte(b.String()), Time: d.commitTime},
		invalid: &InvalidEventError{Reason: ReasonNotOutbox, Detail: fmt.Sprintf(
			"a row of table %s, which the publication publishes but is not the outbox table %s (the value holds its columns as JSON)",
			r.foreign, d.table)},
	}
}

// messageEvent builds the event of one pgoutbox logical message.
func (d *decoder) messageEvent(content []byte) event {
	m, err := outbox.DecodeLogicalMessage(content)
	if err != nil {
		ev := event{id: m.ID, invalid: &InvalidEventError{MessageID: m.ID, Reason: ReasonBadMessage, Detail: err.Error()}}
		ev.msg = kafka.Message{Value: content}
		if m.AggregateID != "" {
			ev.msg.Key = []byte(m.AggregateID)
		}
		return ev
	}
	return d.finish(event{id: m.ID}, &m, nil)
}

// finish builds the Kafka record of m, checks it, and records problem.
func (d *decoder) finish(ev event, m *outbox.Message, problem *InvalidEventError) event {
	topic := m.Topic
	if topic == "" {
		topic = strings.NewReplacer("{aggregate_type}", m.AggregateType, "{event_type}", m.EventType).Replace(d.topicTemplate)
	}
	ev.msg = kafka.Message{
		Topic: topic,
		Value: m.Payload,
		Time:  d.commitTime,
		Headers: []kafka.Header{
			{Key: "message-id", Value: []byte(m.ID.String())},
			{Key: "business-key", Value: []byte(m.BusinessKey)},
			{Key: "event-type", Value: []byte(m.EventType)},
			{Key: "aggregate-type", Value: []byte(m.AggregateType)},
			{Key: "aggregate-id", Value: []byte(m.AggregateID)},
		},
	}
	if m.AggregateID != "" {
		ev.msg.Key = []byte(m.AggregateID)
	}
	if len(m.Headers) > 0 {
		keys := make([]string, 0, len(m.Headers))
		for k := range m.Headers {
			if !reservedHeader(k) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			ev.msg.Headers = append(ev.msg.Headers, kafka.Header{Key: k, Value: []byte(m.Headers[k])})
		}
	}
	if problem == nil {
		if err := contract.CheckKey("business key", m.BusinessKey); err != nil {
			problem = &InvalidEventError{Reason: ReasonInvalidKey, Detail: err.Error()}
		} else if err := validTopic(topic); err != nil {
			problem = &InvalidEventError{Reason: ReasonBadTopic, Detail: err.Error()}
		} else if n := recordSize(&ev.msg); n > d.maxMessageBytes {
			problem = &InvalidEventError{Reason: ReasonTooLarge, Detail: fmt.Sprintf("record of %d bytes exceeds the limit of %d", n, d.maxMessageBytes)}
		}
	}
	if problem != nil {
		problem.MessageID = ev.id
		ev.invalid = problem
	}
	return ev
}

// reservedHeader reports whether the relay sets header k itself.
func reservedHeader(k string) bool {
	switch k {
	case "message-id", "business-key", "event-type", "aggregate-type", "aggregate-id", InstanceHeader:
		return true
	}
	return strings.HasPrefix(k, "dlq-")
}

// recordSize is the size a record counts against the limit: key, value
// and headers.
func recordSize(m *kafka.Message) int {
	n := len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// validTopic applies Kafka's topic name rules.
func validTopic(t string) error {
	if t == "" || t == "." || t == ".." || len(t) > 249 {
		return fmt.Errorf("topic %q is not a legal Kafka topic name", t)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic %q is not a legal Kafka topic name (allowed: a-z A-Z 0-9 . _ -)", t)
		}
	}
	return nil
}

// decodeBytea decodes bytea in the hex output format (\x...).
func decodeBytea(text []byte) ([]byte, error) {
	if len(text) < 2 || text[0] != '\\' || text[1] != 'x' {
		return nil, errors.New("bytea not in hex format (set bytea_output = 'hex')")
	}
	out := make([]byte, hex.DecodedLen(len(text)-2))
	if _, err := hex.Decode(out, text[2:]); err != nil {
		return nil, fmt.Errorf("bytea: %w", err)
	}
	return out, nil
}

// parseHeaders reads a JSON object into string headers; non-string values
// keep their JSON text, and a JSON null means none.
func parseHeaders(text []byte) (map[string]string, error) {
	if string(text) == "null" { // a JSON null: no headers
		return nil, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(text, &raw); err != nil || raw == nil {
		return nil, fmt.Errorf("not a JSON object: %q", truncate(text))
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			out[k] = s
		} else {
			out[k] = string(v)
		}
	}
	return out, nil
}

func truncate(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}
