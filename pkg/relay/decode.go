package relay

import (
	"encoding/binary"
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
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// Reasons of invalid events: the dlq-reason header and the reason label of
// pgoutbox_relay_invalid_events_total.
const (
	ReasonNullColumn       = "null-column"       // NULL in a required column
	ReasonBadValue         = "bad-value"         // a value that does not parse (message ID, bytea)
	ReasonTooLarge         = "too-large"         // record over MaxMessageBytes or the broker's limit
	ReasonUnsupportedType  = "unsupported-type"  // a column value in a form the relay cannot read
	ReasonBadHeaders       = "bad-headers"       // headers not a JSON object, or naming a header the relay writes
	ReasonBadTopic         = "bad-topic"         // not a legal Kafka topic name, the dead-letter topic, or not allowed
	ReasonBadMessage       = "bad-message"       // a pgoutbox logical message that does not parse
	ReasonKafkaRejected    = "kafka-rejected"    // a record the brokers refuse for good (policy, invalid record...)
	ReasonBadColumns       = "bad-columns"       // a row of a table layout (relation message) the relay cannot read
	ReasonNotOutbox        = "not-outbox"        // a row of a table the publication publishes that is not the outbox
	ReasonInvalidKey       = "invalid-key"       // a business key that breaks the key rules (internal/contract)
	ReasonTopicUnavailable = "topic-unavailable" // a topic missing or not writable past TopicUnavailableGrace
)

// layout maps the fields of a table format to positions in a tuple; -1 is
// absent.
type layout struct {
	shape        *tableShape
	pos          [numColumns]int
	byteaPayload bool
	// contentType is the payload column's content type (CloudEvents).
	contentType []byte
	// problem, when not empty, says why the relay cannot read rows of
	// this layout (checkColumns' error): they are invalid (bad-columns).
	problem string
}

// typeNames names the OIDs in error messages.
var typeNames = map[uint32]string{oidBytea: "bytea", oidText: "text", oidJSON: "json", oidVarchar: "varchar", oidUUID: "uuid", oidJSONB: "jsonb",
	16: "boolean", 18: "char", 19: "name", 20: "bigint", 21: "smallint", 23: "integer", 1042: "character", 1114: "timestamp",
	1184: "timestamptz", 1700: "numeric"}

// checkColumns builds the layout of a table of format f given its column
// names and type OIDs, or an error wrapping ErrTableColumns naming every
// problem.
func checkColumns(table string, f TableFormat, names []string, types []uint32) (layout, error) {
	l := layout{shape: shape(f)}
	var problems []string
	for i, want := range l.shape.columns {
		l.pos[i] = -1
		if want.name == "" {
			continue
		}
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
		if i == colPayload {
			l.byteaPayload = got == oidBytea
			l.contentType = contentType(got)
		}
	}
	if len(problems) > 0 {
		return l, fmt.Errorf("%w: %s: %s%s", ErrTableColumns, table, strings.Join(problems, "; "), checkShape(f, names))
	}
	return l, nil
}

// event is one record to publish: a valid record for its topic, or an
// invalid row (invalid != nil) that becomes a dead-letter record.
type event struct {
	msg     kgo.Record
	id      uuid.UUID
	invalid *InvalidEventError
	// minimal marks a dead-letter record reduced to the headers that
	// always fit (see minimalDeadLetter).
	minimal bool
	// tx and commit are set by the reader.
	tx     acktrack.TxID
	commit time.Time
	// cost is what the event took from the buffer budget; the sink gives
	// it back once Kafka acknowledged the event.
	cost int64
	// marker, in exactly-once mode, is an event without a record that
	// ends transaction tx, at endLSN (see exactlyonce.go).
	marker bool
	endLSN uint64
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
	IsOutbox(m *pglogrepl.RelationMessage) (bool, error)
}

// decoder turns pgoutput (proto_version 1) messages into walItems. It keeps
// the relation cache; it is not safe for concurrent use.
type decoder struct {
	table           pgname.Table
	topicTemplate   topicTemplate
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
	// cols is the scratch tuple of parseInsert.
	cols []tupleColumn
	// topics caches topic names: rendered templates by aggregate and
	// event type, and explicit topics, so that a row does not allocate
	// its topic.
	topics topicCache
	// deadLetterTopic and allowedTopics are Config's: a row's topic must
	// be an allowed one (see topicProblem).
	deadLetterTopic string
	allowedTopics   []string
	// format is Config.TableFormat.
	format TableFormat
	// cloudEvents adds the CloudEvents headers, with ceSource as the
	// source attribute (Config.CloudEvents, CloudEventsSource).
	cloudEvents bool
	ceSource    []byte
}

func newDecoder(c *Config, res relationResolver) *decoder {
	table, _ := pgname.Parse(c.Table, "public")
	return &decoder{
		format:          c.TableFormat,
		cloudEvents:     c.CloudEvents,
		ceSource:        []byte(c.CloudEventsSource),
		table:           table,
		topicTemplate:   parseTopicTemplate(c.TopicTemplate),
		maxMessageBytes: c.MaxMessageBytes,
		resolve:         res,
		relations:       make(map[uint32]*relation),
		stopOnInvalid:   c.OnInvalid == InvalidStop,
		logger:          c.Logger,
		deadLetterTopic: c.DeadLetterTopic,
		allowedTopics:   c.AllowedTopics,
	}
}

// maxDetailBytes bounds the detail of an InvalidEventError, and so
// dlq-detail.
const maxDetailBytes = 1024

// errProtocol wraps messages that are not valid pgoutput.
var errProtocol = errors.New("relay: unexpected replication data")

// decode interprets one XLogData payload.
func (d *decoder) decode(data []byte) (walItem, error) {
	if len(data) == 0 {
		return walItem{}, fmt.Errorf("%w: empty message", errProtocol)
	}
	if data[0] == 'I' {
		// The hot path: one message per row, parsed without
		// pglogrepl's allocation per column.
		return d.insert(data)
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
		outbox, err := d.resolve.IsOutbox(m)
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
		l, err := checkColumns(d.table.String(), d.format, names, types)
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
	case *pglogrepl.LogicalDecodingMessage:
		if m.Prefix != outbox.LogicalMessagePrefix || !m.Transactional {
			return walItem{}, nil
		}
		d.messages = true
		return walItem{kind: walEvent, ev: d.messageEvent(m.Content)}, nil
	}
	return walItem{}, nil
}

// insert interprets an Insert message.
func (d *decoder) insert(data []byte) (walItem, error) {
	rel, cols, err := parseInsert(data, d.cols[:0])
	if err != nil {
		return walItem{}, err
	}
	d.cols = cols
	r, known := d.relations[rel]
	if !known {
		return walItem{}, fmt.Errorf("%w: insert into relation %d before its relation message", errProtocol, rel)
	}
	if r.foreign != "" {
		if !r.warned && d.logger != nil {
			r.warned = true
			d.logger.Warn("a table in the publication is not the outbox; its rows are invalid (reason not-outbox)",
				"table", r.foreign, "oid", rel)
		}
		return walItem{kind: walEvent, ev: d.foreignEvent(r, cols)}, nil
	}
	return walItem{kind: walEvent, ev: d.rowEvent(&r.layout, cols)}, nil
}

// tupleColumn is one column of a pgoutput tuple.
type tupleColumn struct {
	kind byte   // pglogrepl.TupleDataType*: 'n' null, 'u' unchanged TOAST, 't' text, 'b' binary
	data []byte // the value of 't' and 'b'
}

// parseInsert reads an Insert message (proto_version 1: 'I', relation OID,
// 'N', the new tuple) into cols, whose data alias data. It replaces
// pglogrepl.Parse for the message of every row, which allocates each
// column twice; a kind other than 't' and 'b' carries no value, as there.
func parseInsert(data []byte, cols []tupleColumn) (rel uint32, _ []tupleColumn, err error) {
	short := func() (uint32, []tupleColumn, error) {
		return 0, cols, fmt.Errorf("%w: malformed 'I' message: %d bytes", errProtocol, len(data))
	}
	if len(data) < 8 {
		return short()
	}
	rel = binary.BigEndian.Uint32(data[1:])
	if data[5] != 'N' {
		return 0, cols, fmt.Errorf("%w: insert without a new tuple (%q)", errProtocol, data[5])
	}
	n := int(binary.BigEndian.Uint16(data[6:]))
	p := 8
	for range n {
		if p >= len(data) {
			return short()
		}
		c := tupleColumn{kind: data[p]}
		p++
		if c.kind == pglogrepl.TupleDataTypeText || c.kind == pglogrepl.TupleDataTypeBinary {
			if len(data)-p < 4 {
				return short()
			}
			size := binary.BigEndian.Uint32(data[p:])
			p += 4
			if uint64(size) > uint64(len(data)-p) {
				return short()
			}
			c.data = data[p : p+int(size) : p+int(size)]
			p += int(size)
		}
		cols = append(cols, c)
	}
	return rel, cols, nil
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

// rowEvent builds the event of one inserted outbox row; cols may alias a
// buffer the caller reuses: the event keeps copies.
func (d *decoder) rowEvent(l *layout, cols []tupleColumn) event {
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
	size := 0
	for i, pos := range l.pos {
		if pos < 0 {
			continue
		}
		if pos >= len(cols) {
			fail(ReasonUnsupportedType, "column %s missing from the row", l.shape.columns[i].name)
			continue
		}
		switch c := cols[pos]; c.kind {
		case pglogrepl.TupleDataTypeNull:
			if l.shape.columns[i].required {
				fail(ReasonNullColumn, "column %s is NULL", l.shape.columns[i].name)
			}
		case pglogrepl.TupleDataTypeText:
			vals[i], present[i] = c.data, true
			size += len(c.data)
		default:
			fail(ReasonUnsupportedType, "column %s sent as %q, want text", l.shape.columns[i].name, c.kind)
		}
	}
	// One copy of the values the record keeps; its key, value and
	// headers are slices of it.
	own := make([]byte, 0, size)
	for i := range vals {
		if present[i] {
			own = append(own, vals[i]...)
			vals[i] = own[len(own)-len(vals[i]) : len(own) : len(own)]
		}
	}
	f := fields{aggregateType: vals[colAggregateType], aggregateID: vals[colAggregateID], eventType: vals[colEventType],
		businessKey: vals[colBusinessKey], payload: vals[colPayload], topic: vals[colTopic]}
	if present[colID] {
		id, err := uuid.ParseBytes(vals[colID])
		if err != nil {
			fail(ReasonBadValue, "message ID %q is not a UUID", truncate(vals[colID]))
		}
		ev.id = id
		f.idText = vals[colID]
	}
	if present[colPayload] && l.byteaPayload {
		raw, err := decodeBytea(f.payload)
		if err != nil {
			fail(ReasonBadValue, "payload: %v", err)
		}
		f.payload = raw
	}
	if present[colHeaders] {
		var err error
		if f.headers, err = parseHeaders(vals[colHeaders]); err != nil {
			fail(ReasonBadHeaders, "headers: %v", err)
		}
	}
	if l.shape.debeziumHeaders {
		d.debezium(&ev, &f, vals[colTracing])
	}
	f.contentType = l.contentType
	return d.finish(ev, &f, problem)
}

// debezium completes the fields of a row of a Debezium outbox table: the
// message ID stands for the business key it lacks, the headers Debezium's
// router writes (id, type), and the trace context of its
// tracingspancontext column.
func (d *decoder) debezium(ev *event, f *fields, tracing []byte) {
	if f.idText != nil {
		f.idText = canonicalUUID(ev.id, f.idText)
		f.businessKey = f.idText
	}
	f.headers = traceHeaders(tracing)
	if f.headers == nil {
		f.headers = make(map[string]string, 2)
	}
	f.headers[debeziumHeaderID] = string(f.idText)
	f.headers[debeziumHeaderType] = string(f.eventType)
}

// foreignEvent builds the invalid event (reason not-outbox) of a row of a
// table the publication publishes that is not the outbox: its value is the
// row as a JSON object of column texts (null for NULL), so nothing is lost.
func (d *decoder) foreignEvent(r *relation, cols []tupleColumn) event {
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
		if c.kind != pglogrepl.TupleDataTypeText {
			b.WriteString("null")
			continue
		}
		v, _ := json.Marshal(string(c.data))
		b.Write(v)
	}
	b.WriteByte('}')
	return event{
		msg: kgo.Record{Value: []byte(b.String()), Timestamp: d.commitTime},
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
		ev.msg = kgo.Record{Value: content}
		if m.AggregateID != "" {
			ev.msg.Key = []byte(m.AggregateID)
		}
		return ev
	}
	f := fields{aggregateType: []byte(m.AggregateType), aggregateID: []byte(m.AggregateID), eventType: []byte(m.EventType),
		businessKey: []byte(m.BusinessKey), payload: m.Payload, headers: m.Headers, topic: []byte(m.Topic), contentType: ceJSON}
	return d.finish(event{id: m.ID}, &f, nil)
}

// fields are the parts of an outbox row that make its Kafka record. The
// record keeps the slices (key, value and header values alias them).
type fields struct {
	// idText is the message ID column as sent; the message-id header
	// is the event's ID in canonical form, which is often the same bytes.
	idText                                                    []byte
	aggregateType, aggregateID, eventType, businessKey, topic []byte
	payload                                                   []byte
	headers                                                   map[string]string
	// contentType is the payload's content type (CloudEvents): JSON for
	// a json or jsonb column and a logical message.
	contentType []byte
}

// finish builds the Kafka record of f, checks it, and records problem.
// The topic is checked before anything else uses it: an illegal name is
// never cached, and the record keeps only a bounded excerpt of it (for the
// dead-letter record's original-topic header and the log line).
func (d *decoder) finish(ev event, f *fields, problem *InvalidEventError) event {
	topic, topicErr := d.topic(f.aggregateType, f.eventType, f.topic)
	ev.msg = kgo.Record{
		Topic:     topic,
		Value:     f.payload,
		Timestamp: d.commitTime,
		// Room for the CloudEvents headers, the row's headers and the
		// instance header (see stream.enqueue).
		Headers: make([]kgo.RecordHeader, 5, 6+numCloudEventsHeaders+len(f.headers)),
	}
	ev.msg.Headers[0] = kgo.RecordHeader{Key: contract.HeaderMessageID, Value: canonicalUUID(ev.id, f.idText)}
	ev.msg.Headers[1] = kgo.RecordHeader{Key: contract.HeaderBusinessKey, Value: nonNil(f.businessKey)}
	ev.msg.Headers[2] = kgo.RecordHeader{Key: contract.HeaderEventType, Value: nonNil(f.eventType)}
	ev.msg.Headers[3] = kgo.RecordHeader{Key: contract.HeaderAggregateType, Value: nonNil(f.aggregateType)}
	ev.msg.Headers[4] = kgo.RecordHeader{Key: contract.HeaderAggregateID, Value: nonNil(f.aggregateID)}
	if len(f.aggregateID) > 0 {
		ev.msg.Key = f.aggregateID
	}
	if d.cloudEvents {
		ev.msg.Headers = d.appendCloudEvents(ev.msg.Headers, f)
	}
	// A header the relay writes may not come from the row: it is left
	// out, and the row is dead-lettered (a row posing as a dead letter,
	// or as another message, is a producer's bug or an attack).
	var reserved []string
	if len(f.headers) > 0 {
		keys := make([]string, 0, len(f.headers))
		for k := range f.headers {
			if contract.WrittenByRelay(k) || d.cloudEvents && contract.CloudEventsHeader(k) {
				reserved = append(reserved, k)
			} else {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			ev.msg.Headers = append(ev.msg.Headers, kgo.RecordHeader{Key: k, Value: []byte(f.headers[k])})
		}
	}
	if problem == nil {
		if err := contract.CheckKey("business key", string(f.businessKey)); err != nil {
			problem = &InvalidEventError{Reason: ReasonInvalidKey, Detail: err.Error()}
		} else if topicErr != nil {
			problem = &InvalidEventError{Reason: ReasonBadTopic, Detail: topicErr.Error()}
		} else if len(reserved) > 0 {
			sort.Strings(reserved)
			problem = &InvalidEventError{Reason: ReasonBadHeaders, Detail: fmt.Sprintf(
				"headers name %s, which the relay writes itself (reserved: message-id, business-key, event-type, aggregate-type, aggregate-id, original-topic, relay-instance, dlq-*)",
				contract.Excerpt([]byte(strings.Join(reserved, ",")), 128))}
		} else if n := recordSize(&ev.msg); n > d.maxMessageBytes {
			problem = &InvalidEventError{Reason: ReasonTooLarge, Detail: fmt.Sprintf("record of %d bytes exceeds the limit of %d", n, d.maxMessageBytes)}
		}
	}
	if problem != nil {
		problem.MessageID = ev.id
		problem.Detail = string(contract.Cut([]byte(problem.Detail), maxDetailBytes))
		ev.invalid = problem
	}
	return ev
}

// route is the topic the relay writes a row with these values to: its
// topic column, else the topic template rendered with its aggregate and
// event types; the dead-letter topic when that is not a topic the relay
// publishes to (bad-topic). Verify routes rows with it too.
func (d *decoder) route(aggregateType, eventType, column []byte) string {
	topic, err := d.topic(aggregateType, eventType, column)
	if err != nil {
		return d.deadLetterTopic
	}
	return topic
}

// topic is the topic of a row: its topic column, else the topic template
// rendered with its aggregate and event types, checked (see topicProblem).
// For an illegal name it returns an excerpt (see excerptTopic).
func (d *decoder) topic(aggregateType, eventType, column []byte) (string, error) {
	var topic string
	var err error
	if len(column) > 0 {
		topic, err = d.topics.explicit(column)
	} else {
		topic, err = d.topics.rendered(&d.topicTemplate, aggregateType, eventType)
	}
	if err == nil {
		err = d.topicProblem(topic)
	}
	return topic, err
}

// topicProblem says why the relay does not publish to topic, a legal topic
// name: it is the dead-letter topic (a row may not pose as a dead letter),
// or it starts with none of the allowed prefixes.
func (d *decoder) topicProblem(topic string) error {
	if topic == d.deadLetterTopic {
		return fmt.Errorf("topic %s is the dead-letter topic, which only the relay writes", topic)
	}
	if len(d.allowedTopics) == 0 {
		return nil
	}
	for _, p := range d.allowedTopics {
		if strings.HasPrefix(topic, p) {
			return nil
		}
	}
	return fmt.Errorf("topic %s starts with none of the allowed topic prefixes (%s)", topic, strings.Join(d.allowedTopics, ", "))
}

// canonicalUUID is the text of id (as uuid.UUID.String), reusing text when
// it already is.
func canonicalUUID(id uuid.UUID, text []byte) []byte {
	var buf [36]byte
	hex.Encode(buf[0:8], id[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], id[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], id[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], id[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:], id[10:])
	if string(text) == string(buf[:]) {
		return text
	}
	return append([]byte(nil), buf[:]...)
}

// nonNil is b, or an empty slice for nil: a header value is never null.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Bounds of a topicCache: each of its maps holds at most topicCacheSize
// names, and only names whose cache key (the explicit topic, or the
// template's fields) is at most topicCacheKeyBytes long; a full map starts
// over. Together they bound the cache to about 2 × 1,024 × (512 + 249)
// bytes plus the maps' own overhead.
const (
	topicCacheSize     = 1024
	topicCacheKeyBytes = 512
)

// topicCache holds the topic names rows used last, so that most rows
// share one string rather than allocating their own. It holds legal topic
// names only (contract.CheckTopic): an illegal one is never kept.
type topicCache struct {
	byTypes  map[string]string // length of the aggregate type, aggregate type, event type: rendered template
	byColumn map[string]string // explicit topic column: the same text
	scratch  []byte
	render   []byte
}

// rendered is the topic template rendered for aggregateType and eventType.
func (c *topicCache) rendered(t *topicTemplate, aggregateType, eventType []byte) (string, error) {
	// The key holds only the fields the template uses.
	if !t.uses(eventTypePart) {
		eventType = nil
	}
	if !t.uses(aggregateTypePart) {
		aggregateType = nil
	}
	c.scratch = append(append(binary.AppendUvarint(c.scratch[:0], uint64(len(aggregateType))), aggregateType...), eventType...)
	if topic, ok := c.byTypes[string(c.scratch)]; ok {
		return topic, nil
	}
	c.render = t.render(c.render[:0], aggregateType, eventType)
	if err := contract.CheckTopic(c.render); err != nil {
		return excerptTopic(c.render), err
	}
	topic := string(c.render)
	if len(c.scratch) <= topicCacheKeyBytes {
		if len(c.byTypes) >= topicCacheSize || c.byTypes == nil {
			c.byTypes = make(map[string]string)
		}
		c.byTypes[string(c.scratch)] = topic
	}
	if cap(c.render) > 4*topicCacheKeyBytes {
		c.render = nil // a huge type's buffer is not kept
	}
	return topic, nil
}

// explicit is the topic named by a row's topic column.
func (c *topicCache) explicit(b []byte) (string, error) {
	if topic, ok := c.byColumn[string(b)]; ok {
		return topic, nil
	}
	if err := contract.CheckTopic(b); err != nil {
		return excerptTopic(b), err
	}
	if len(c.byColumn) >= topicCacheSize || c.byColumn == nil {
		c.byColumn = make(map[string]string)
	}
	topic := string(b)
	c.byColumn[topic] = topic
	return topic, nil
}

// excerptTopic is what an event keeps of an illegal topic name: at most
// contract.MaxTopicBytes+1 bytes, so that its dead-letter record can tell a
// name cut to contract.MaxTopicBytes from one that was that long.
func excerptTopic(b []byte) string {
	return string(b[:min(len(b), contract.MaxTopicBytes+1)])
}

// size is the number of names the cache holds and the bytes of their keys
// and values.
func (c *topicCache) size() (names, bytes int) {
	for _, m := range []map[string]string{c.byTypes, c.byColumn} {
		for k, v := range m {
			names++
			bytes += len(k) + len(v)
		}
	}
	return names, bytes
}

// recordSize is the size a record counts against the limit: key, value
// and headers.
func recordSize(m *kgo.Record) int {
	n := len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
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
