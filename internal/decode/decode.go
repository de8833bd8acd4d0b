package decode

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Layout maps the fields of a table format to positions in a tuple; -1 is
// absent.
type Layout struct {
	Shape        *tableformat.TableShape
	pos          [tableformat.NumColumns]int
	byteaPayload bool
	// contentType is the payload column's content type (CloudEvents).
	contentType []byte
	// problem, when not empty, says why the relay cannot read rows of
	// this layout (CheckColumns' error): they are invalid (bad-columns).
	problem string
}

// typeNames names the OIDs in error messages.
var typeNames = map[uint32]string{tableformat.OIDBytea: "bytea", tableformat.OIDText: "text", tableformat.OIDJSON: "json", tableformat.OIDVarchar: "varchar", tableformat.OIDUUID: "uuid", tableformat.OIDJSONB: "jsonb",
	16: "boolean", 18: "char", 19: "name", 20: "bigint", 21: "smallint", 23: "integer", 1042: "character", 1114: "timestamp",
	1184: "timestamptz", 1700: "numeric"}

// CheckColumns builds the layout of a table of format f given its column
// names and type OIDs, or an error wrapping ErrTableColumns naming every
// problem.
func CheckColumns(table string, f relaytype.TableFormat, names []string, types []uint32) (Layout, error) {
	l := Layout{Shape: tableformat.Shape(f)}
	var problems []string
	for i, want := range l.Shape.Columns {
		l.pos[i] = -1
		if want.Name == "" {
			continue
		}
		for j, name := range names {
			if name == want.Name {
				l.pos[i] = j
			}
		}
		if l.pos[i] < 0 {
			if want.Required {
				problems = append(problems, "missing column "+want.Name)
			}
			continue
		}
		got := types[l.pos[i]]
		ok := false
		var accepted []string
		for _, t := range want.Types {
			ok = ok || t == got
			accepted = append(accepted, typeNames[t])
		}
		if !ok {
			name := typeNames[got]
			if name == "" {
				name = fmt.Sprintf("type OID %d", got)
			}
			problems = append(problems, fmt.Sprintf("column %s is %s, want %s", want.Name, name, strings.Join(accepted, " or ")))
		}
		if i == tableformat.ColPayload {
			l.byteaPayload = got == tableformat.OIDBytea
			l.contentType = contentType(got)
		}
	}
	if len(problems) > 0 {
		return l, fmt.Errorf("%w: %s: %s%s", relaytype.ErrTableColumns, table, strings.Join(problems, "; "), tableformat.CheckShape(f, names))
	}
	return l, nil
}

// Event is one record to publish: a valid record for its topic, or an
// invalid row (Invalid != nil) that becomes a dead-letter record.
type Event struct {
	// Record is the record, as the decoder built it; its Pos is set by
	// the reader: where the event is in the WAL, the same in every session
	// that reads it (exactly-once progress and refusals are kept by it).
	Record publish.Record
	// ID is the message ID; uuid.Nil when the row has none that parses.
	ID      uuid.UUID
	Invalid *relaytype.InvalidEventError
	// Minimal marks a dead-letter record reduced to the headers that
	// always fit (see MinimalDeadLetter).
	Minimal bool
	// Tx and Commit are set by the reader: the event's transaction and
	// its commit time.
	Tx     acktrack.TxID
	Commit time.Time
	// Cost is what the event took from the buffer budget; the sink gives
	// it back once Kafka acknowledged the event.
	Cost int64
	// Marker, in exactly-once mode, is an event without a record that
	// ends transaction Tx, at EndLSN (see internal/sink's exactlyonce.go).
	Marker bool
	EndLSN uint64
	// pooled, when set, is the pooled buffer Record's bytes are slices of
	// (see Recycle).
	pooled *[]byte
}

// WALKind says what one pgoutput message meant to the relay.
type WALKind int

const (
	walNone   WALKind = iota // nothing to do (other tables, types, origins...)
	WALBegin                 // a transaction starts
	WALCommit                // it ends at EndLSN
	WALEvent                 // an outbox event of the current transaction
)

// WALItem is what Decode made of one pgoutput message: its kind, the
// transaction's commit time and final LSN (WALBegin), its end
// (WALCommit), or the event (WALEvent).
type WALItem struct {
	Kind       WALKind
	CommitTime time.Time
	// FinalLSN is a WALBegin's: where the transaction's commit record
	// starts.
	FinalLSN pglogrepl.LSN
	// EndLSN is a WALCommit's: where the transaction ends.
	EndLSN pglogrepl.LSN
	Event  Event
}

// relation is a cached relation message: the outbox (or a partition of
// it, or the outbox under a former name) with its layout, or a foreign
// table of the publication.
type relation struct {
	Layout
	// foreign names a table that is not the outbox; empty for the outbox.
	foreign string
	// names are the columns, for the dead-letter value of a foreign row.
	names []string
	// warned is set once a foreign row was logged.
	warned bool
	// own marks one of the relay's own tables: its rows are skipped.
	own bool
}

// relationResolver says whether a relation message is the outbox's. The
// session's catalog answers by OID (see slotstate.Catalog.IsOutbox); tests use a fixed
// set.
type relationResolver interface {
	IsOutbox(m *pglogrepl.RelationMessage) (bool, error)
}

// Decoder turns pgoutput (proto_version 1) messages into WALItems. It keeps
// the relation cache; it is not safe for concurrent use.
type Decoder struct {
	table           pgname.Table
	topicTemplate   tableformat.TopicTemplate
	maxMessageBytes int
	resolve         relationResolver
	relations       map[uint32]*relation
	CommitTime      time.Time
	// stopOnInvalid makes an unusable layout an error (ErrTableColumns)
	// rather than a layout whose rows are invalid.
	stopOnInvalid bool
	logger        *slog.Logger
	// Messages is set once a pgoutbox logical message was decoded (the
	// relay state records it: a backfill cannot recover those).
	Messages bool
	// cols is the scratch tuple of parseInsert.
	cols []TupleColumn
	// topics caches topic names: rendered templates by aggregate and
	// event type, and explicit topics, so that a row does not allocate
	// its topic.
	topics topicCache
	// deadLetterTopic, progressTopic and allowedTopics are Config's: a
	// row's topic must be an allowed one (see topicProblem).
	deadLetterTopic string
	progressTopic   string
	allowedTopics   []string
	reservedTopic   func(string) bool
	relayTables     []pgname.Table
	// format is Config.TableFormat.
	format relaytype.TableFormat
	// cloudEvents adds the CloudEvents headers, with ceSource as the
	// source attribute (Config.CloudEvents, CloudEventsSource).
	cloudEvents bool
	ceSource    []byte
}

// NewDecoder returns a decoder of c's table; res tells the outbox's
// relation messages from other tables' (nil when rows come from the
// table itself, as in a backfill).
func NewDecoder(c Config, res relationResolver) *Decoder {
	table, _ := pgname.Parse(c.Table, "public")
	return &Decoder{
		format:          c.TableFormat,
		cloudEvents:     c.CloudEvents,
		ceSource:        []byte(c.CloudEventsSource),
		table:           table,
		topicTemplate:   tableformat.ParseTopicTemplate(c.TopicTemplate),
		maxMessageBytes: c.MaxMessageBytes,
		resolve:         res,
		relations:       make(map[uint32]*relation),
		stopOnInvalid:   c.StopOnInvalid,
		logger:          c.Logger,
		deadLetterTopic: c.DeadLetterTopic,
		progressTopic:   c.ProgressTopic,
		allowedTopics:   c.AllowedTopics,
		reservedTopic:   c.ReservedTopic,
		relayTables:     c.RelayTables,
	}
}

// MaxDetailBytes bounds the detail of an InvalidEventError, and so
// dlq-detail.
const MaxDetailBytes = 1024

// ErrProtocol wraps messages that are not valid pgoutput.
var ErrProtocol = errors.New("relay: unexpected replication data")

// Decode interprets one XLogData payload.
func (d *Decoder) Decode(data []byte) (WALItem, error) {
	if len(data) == 0 {
		return WALItem{}, fmt.Errorf("%w: empty message", ErrProtocol)
	}
	if data[0] == 'I' {
		// The hot path: one message per row, parsed without
		// pglogrepl's allocation per column.
		return d.insert(data)
	}
	msg, err := parsePgoutput(data)
	if err != nil {
		return WALItem{}, err
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		// Matched by OID through the catalog, not by the name in the
		// message: a partition, a renamed or a replaced outbox carry
		// other names, and a table that is not the outbox is never
		// skipped silently.
		outbox, err := d.resolve.IsOutbox(m)
		if err != nil {
			return WALItem{}, err
		}
		names := make([]string, len(m.Columns))
		types := make([]uint32, len(m.Columns))
		for i, c := range m.Columns {
			names[i], types[i] = c.Name, c.DataType
		}
		if !outbox {
			t := pgname.Table{Schema: m.Namespace, Name: m.RelationName}
			d.relations[m.RelationID] = &relation{foreign: t.String(), names: names, own: slices.Contains(d.relayTables, t)}
			return WALItem{}, nil
		}
		l, err := CheckColumns(d.table.String(), d.format, names, types)
		if err != nil {
			if d.stopOnInvalid {
				return WALItem{}, err
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
		d.relations[m.RelationID] = &relation{Layout: l, names: names}
		return WALItem{}, nil
	case *pglogrepl.BeginMessage:
		d.CommitTime = m.CommitTime
		return WALItem{Kind: WALBegin, CommitTime: m.CommitTime, FinalLSN: m.FinalLSN}, nil
	case *pglogrepl.CommitMessage:
		return WALItem{Kind: WALCommit, CommitTime: m.CommitTime, EndLSN: m.TransactionEndLSN}, nil
	case *pglogrepl.LogicalDecodingMessage:
		if m.Prefix != contract.LogicalMessagePrefix || !m.Transactional {
			return WALItem{}, nil
		}
		d.Messages = true
		return WALItem{Kind: WALEvent, Event: d.messageEvent(m.Content)}, nil
	}
	return WALItem{}, nil
}

// insert interprets an Insert message.
func (d *Decoder) insert(data []byte) (WALItem, error) {
	rel, cols, err := parseInsert(data, d.cols[:0])
	if err != nil {
		return WALItem{}, err
	}
	d.cols = cols
	r, known := d.relations[rel]
	if !known {
		return WALItem{}, fmt.Errorf("%w: insert into relation %d before its relation message", ErrProtocol, rel)
	}
	if r.own {
		return WALItem{}, nil // the relay's bookkeeping: never an event
	}
	if r.foreign != "" {
		if !r.warned && d.logger != nil {
			r.warned = true
			d.logger.Warn("a table in the publication is not the outbox; its rows are invalid (reason not-outbox)",
				"table", r.foreign, "oid", rel)
		}
		return WALItem{Kind: WALEvent, Event: d.foreignEvent(r, cols)}, nil
	}
	return WALItem{Kind: WALEvent, Event: d.RowEvent(&r.Layout, cols)}, nil
}

// TupleColumn is one column of a pgoutput tuple.
type TupleColumn struct {
	Kind byte   // pglogrepl.TupleDataType*: 'n' null, 'u' unchanged TOAST, 't' text, 'b' binary
	Data []byte // the value of 't' and 'b'
}

// parseInsert reads an Insert message (proto_version 1: 'I', relation OID,
// 'N', the new tuple) into cols, whose data alias data. It replaces
// pglogrepl.Parse for the message of every row, which allocates each
// column twice; a kind other than 't' and 'b' carries no value, as there.
func parseInsert(data []byte, cols []TupleColumn) (rel uint32, _ []TupleColumn, err error) {
	short := func() (uint32, []TupleColumn, error) {
		return 0, cols, fmt.Errorf("%w: malformed 'I' message: %d bytes", ErrProtocol, len(data))
	}
	if len(data) < 8 {
		return short()
	}
	rel = binary.BigEndian.Uint32(data[1:])
	if data[5] != 'N' {
		return 0, cols, fmt.Errorf("%w: insert without a new tuple (%q)", ErrProtocol, data[5])
	}
	n := int(binary.BigEndian.Uint16(data[6:]))
	p := 8
	for range n {
		if p >= len(data) {
			return short()
		}
		c := TupleColumn{Kind: data[p]}
		p++
		if c.Kind == pglogrepl.TupleDataTypeText || c.Kind == pglogrepl.TupleDataTypeBinary {
			if len(data)-p < 4 {
				return short()
			}
			size := binary.BigEndian.Uint32(data[p:])
			p += 4
			if uint64(size) > uint64(len(data)-p) {
				return short()
			}
			c.Data = data[p : p+int(size) : p+int(size)]
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
			msg, err = nil, fmt.Errorf("%w: malformed %q message: %v", ErrProtocol, data[0], p)
		}
	}()
	msg, err = pglogrepl.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	return msg, nil
}

// RowEvent builds the event of one inserted outbox row; cols may alias a
// buffer the caller reuses: the event keeps copies.
func (d *Decoder) RowEvent(l *Layout, cols []TupleColumn) Event {
	var (
		vals    [tableformat.NumColumns][]byte
		present [tableformat.NumColumns]bool
		ev      Event
	)
	var problem *relaytype.InvalidEventError
	fail := func(reason, format string, args ...any) {
		if problem == nil {
			problem = &relaytype.InvalidEventError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
		}
	}
	if l.problem != "" {
		fail(relaytype.ReasonBadColumns, "%s", l.problem)
	}
	size := 0
	for i, pos := range l.pos {
		if pos < 0 {
			continue
		}
		if pos >= len(cols) {
			fail(relaytype.ReasonUnsupportedType, "column %s missing from the row", l.Shape.Columns[i].Name)
			continue
		}
		switch c := cols[pos]; c.Kind {
		case pglogrepl.TupleDataTypeNull:
			if l.Shape.Columns[i].Required {
				fail(relaytype.ReasonNullColumn, "column %s is NULL", l.Shape.Columns[i].Name)
			}
		case pglogrepl.TupleDataTypeText:
			vals[i], present[i] = c.Data, true
			size += len(c.Data)
		default:
			fail(relaytype.ReasonUnsupportedType, "column %s sent as %q, want text", l.Shape.Columns[i].Name, c.Kind)
		}
	}
	// One copy of the values the record keeps; its key, value and
	// headers are slices of it. A large row's comes from the pools (see
	// rowbuf.go).
	var own []byte
	if ev.pooled = rowBuffer(size); ev.pooled != nil {
		own = *ev.pooled
	} else {
		own = make([]byte, 0, size)
	}
	for i := range vals {
		if present[i] {
			own = append(own, vals[i]...)
			vals[i] = own[len(own)-len(vals[i]) : len(own) : len(own)]
		}
	}
	f := fields{aggregateType: vals[tableformat.ColAggregateType], aggregateID: vals[tableformat.ColAggregateID], eventType: vals[tableformat.ColEventType],
		businessKey: vals[tableformat.ColBusinessKey], payload: vals[tableformat.ColPayload], topic: vals[tableformat.ColTopic]}
	if present[tableformat.ColID] {
		id, err := uuid.ParseBytes(vals[tableformat.ColID])
		if err != nil {
			fail(relaytype.ReasonBadValue, "message ID %q is not a UUID", truncate(vals[tableformat.ColID]))
		}
		ev.ID = id
		f.idText = vals[tableformat.ColID]
	}
	if present[tableformat.ColPayload] && l.byteaPayload {
		raw, err := decodeBytea(f.payload)
		if err != nil {
			fail(relaytype.ReasonBadValue, "payload: %v", err)
		}
		f.payload = raw
	}
	if present[tableformat.ColHeaders] {
		var err error
		if f.headers, err = parseHeaders(vals[tableformat.ColHeaders]); err != nil {
			fail(relaytype.ReasonBadHeaders, "headers: %v", err)
		}
	}
	if l.Shape.RouterHeaders {
		d.debezium(&ev, &f, vals[tableformat.ColTracing])
	}
	f.contentType = l.contentType
	return d.finish(ev, &f, problem)
}

// debezium completes the fields of a row of a Debezium outbox table: the
// message ID stands for the business key it lacks, the headers Debezium's
// router writes (id, type), and the trace context of its
// tracingspancontext column.
func (d *Decoder) debezium(ev *Event, f *fields, tracing []byte) {
	if f.idText != nil {
		f.idText = canonicalUUID(ev.ID, f.idText)
		f.businessKey = f.idText
	}
	f.headers = tableformat.TraceHeaders(tracing)
	if f.headers == nil {
		f.headers = make(map[string]string, 2)
	}
	f.headers[tableformat.DebeziumHeaderID] = string(f.idText)
	f.headers[tableformat.DebeziumHeaderType] = string(f.eventType)
}

// foreignEvent builds the invalid event (reason not-outbox) of a row of a
// table the publication publishes that is not the outbox: its value is the
// row as a JSON object of column texts (null for NULL), so nothing is lost.
func (d *Decoder) foreignEvent(r *relation, cols []TupleColumn) Event {
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
		if c.Kind != pglogrepl.TupleDataTypeText {
			b.WriteString("null")
			continue
		}
		v, _ := json.Marshal(string(c.Data))
		b.Write(v)
	}
	b.WriteByte('}')
	return Event{
		Record: publish.Record{Value: []byte(b.String()), Timestamp: d.CommitTime},
		Invalid: &relaytype.InvalidEventError{Reason: relaytype.ReasonNotOutbox, Detail: fmt.Sprintf(
			"a row of table %s, which the publication publishes but is not the outbox table %s (the value holds its columns as JSON)",
			r.foreign, d.table)},
	}
}

// messageEvent builds the event of one pgoutbox logical message.
func (d *Decoder) messageEvent(content []byte) Event {
	m, err := contract.DecodeLogicalMessage(content)
	if err != nil {
		ev := Event{ID: m.ID, Invalid: &relaytype.InvalidEventError{MessageID: m.ID, Reason: relaytype.ReasonBadMessage, Detail: err.Error()}}
		ev.Record = publish.Record{Value: content}
		if m.AggregateID != "" {
			ev.Record.Key = []byte(m.AggregateID)
		}
		return ev
	}
	f := fields{aggregateType: []byte(m.AggregateType), aggregateID: []byte(m.AggregateID), eventType: []byte(m.EventType),
		businessKey: []byte(m.BusinessKey), payload: m.Payload, headers: m.Headers, topic: []byte(m.Topic), contentType: ceJSON}
	return d.finish(Event{ID: m.ID}, &f, nil)
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
func (d *Decoder) finish(ev Event, f *fields, problem *relaytype.InvalidEventError) Event {
	topic, topicErr := d.topic(f.aggregateType, f.eventType, f.topic)
	// Room for the contract's five headers, the row's, the instance
	// header (see wal.Stream's stage) and, when on, the CloudEvents
	// headers: every record holds its headers' slice while it is queued
	// and in flight.
	room := 6 + len(f.headers)
	if d.cloudEvents {
		room += numCloudEventsHeaders
	}
	ev.Record = publish.Record{
		Topic:     topic,
		Value:     f.payload,
		Timestamp: d.CommitTime,
		Headers:   make([]publish.Header, 5, room),
	}
	ev.Record.Headers[0] = publish.Header{Key: contract.HeaderMessageID, Value: canonicalUUID(ev.ID, f.idText)}
	ev.Record.Headers[1] = publish.Header{Key: contract.HeaderBusinessKey, Value: nonNil(f.businessKey)}
	ev.Record.Headers[2] = publish.Header{Key: contract.HeaderEventType, Value: nonNil(f.eventType)}
	ev.Record.Headers[3] = publish.Header{Key: contract.HeaderAggregateType, Value: nonNil(f.aggregateType)}
	ev.Record.Headers[4] = publish.Header{Key: contract.HeaderAggregateID, Value: nonNil(f.aggregateID)}
	if len(f.aggregateID) > 0 {
		ev.Record.Key = f.aggregateID
	}
	if d.cloudEvents {
		ev.Record.Headers = d.appendCloudEvents(ev.Record.Headers, f)
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
			ev.Record.Headers = append(ev.Record.Headers, publish.Header{Key: k, Value: []byte(f.headers[k])})
		}
	}
	if problem == nil {
		if err := contract.CheckKey("business key", string(f.businessKey)); err != nil {
			problem = &relaytype.InvalidEventError{Reason: relaytype.ReasonInvalidKey, Detail: err.Error()}
		} else if topicErr != nil {
			problem = &relaytype.InvalidEventError{Reason: relaytype.ReasonBadTopic, Detail: topicErr.Error()}
		} else if len(reserved) > 0 {
			sort.Strings(reserved)
			problem = &relaytype.InvalidEventError{Reason: relaytype.ReasonBadHeaders, Detail: fmt.Sprintf(
				"headers name %s, which the relay writes itself (reserved: message-id, business-key, event-type, aggregate-type, aggregate-id, original-topic, relay-instance, pgoutbox-progress, dlq-*)",
				contract.Excerpt([]byte(strings.Join(reserved, ",")), 128))}
		} else if n := RecordSize(&ev.Record); n > d.maxMessageBytes {
			problem = &relaytype.InvalidEventError{Reason: relaytype.ReasonTooLarge, Detail: fmt.Sprintf("record of %d bytes exceeds the limit of %d", n, d.maxMessageBytes)}
		}
	}
	if problem != nil {
		problem.MessageID = ev.ID
		problem.Detail = string(contract.Cut([]byte(problem.Detail), MaxDetailBytes))
		ev.Invalid = problem
	}
	return ev
}

// Route is the topic the relay writes a row with these values to: its
// topic column, else the topic template rendered with its aggregate and
// event types; the dead-letter topic when that is not a topic the relay
// publishes to (bad-topic). Verify routes rows with it too.
func (d *Decoder) Route(aggregateType, eventType, column []byte) string {
	topic, err := d.topic(aggregateType, eventType, column)
	if err != nil {
		return d.deadLetterTopic
	}
	return topic
}

// topic is the topic of a row: its topic column, else the topic template
// rendered with its aggregate and event types, checked (see topicProblem).
// For an illegal name it returns an excerpt (see excerptTopic).
func (d *Decoder) topic(aggregateType, eventType, column []byte) (string, error) {
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
// a progress topic (the configured one or the default, which every
// exactly-once relay of another slot may read: a row may not pose as
// progress), a fleet's topic (pgoutbox.fleet.*) or one another source of
// the fleet writes (its dead-letter or progress topic), or it starts with
// none of the allowed prefixes.
func (d *Decoder) topicProblem(topic string) error {
	switch topic {
	case d.deadLetterTopic:
		return fmt.Errorf("topic %s is the dead-letter topic, which only the relay writes", topic)
	case d.progressTopic, contract.DefaultProgressTopic:
		return fmt.Errorf("topic %s is a progress topic of exactly-once relays, which only the relay writes", topic)
	}
	if strings.HasPrefix(topic, contract.FleetTopicPrefix) {
		return fmt.Errorf("topic %s is a relay fleet's topic, which only relays use", topic)
	}
	if d.reservedTopic != nil && d.reservedTopic(topic) {
		return fmt.Errorf("topic %s is written by the relay of another source of the fleet (its dead-letter or progress topic)", topic)
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
func (c *topicCache) rendered(t *tableformat.TopicTemplate, aggregateType, eventType []byte) (string, error) {
	// The key holds only the fields the template uses.
	if !t.Uses(tableformat.EventTypePart) {
		eventType = nil
	}
	if !t.Uses(tableformat.AggregateTypePart) {
		aggregateType = nil
	}
	c.scratch = append(append(binary.AppendUvarint(c.scratch[:0], uint64(len(aggregateType))), aggregateType...), eventType...)
	if topic, ok := c.byTypes[string(c.scratch)]; ok {
		return topic, nil
	}
	c.render = t.Render(c.render[:0], aggregateType, eventType)
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

// RecordSize is the size a record counts against the limit: key, value
// and headers.
func RecordSize(m *publish.Record) int {
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
