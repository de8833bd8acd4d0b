package verify

import (
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
)

// readRecords reads the routed topics (and the dead-letter topic) from the
// first offset whose timestamp is at or after From minus Margin (the record
// timestamp is the commit time, never before the row's created_at) up to
// the high watermark listed when the read begins, keeping the records a
// read_committed reader sees (through Config.Reader: Kafka's is
// kafkapub.ScanTopics), and sorts what it keeps of each record by message
// ID.
func (v *verifier) readRecords(ctx context.Context) error {
	c := v.c
	v.dlq = -1
	if c.DeadLetterTopic != "" {
		i, err := v.topics.intern(c.DeadLetterTopic)
		if err != nil {
			return err
		}
		v.dlq = int64(i)
	}
	names := slices.Clone(v.topics.names)
	scan, err := c.Reader.Read(ctx, names, c.From.Add(-c.Margin), v.addRecord)
	if err != nil {
		return err
	}
	v.rep.Topics = scan.Ranges
	v.listMissingTopics(scan.Missing)
	v.rep.UnreadableTopics = scan.Unreadable
	v.unreadable = make(map[uint32]bool, len(scan.Unreadable))
	for _, u := range scan.Unreadable {
		v.unreadable[v.topics.index[u.Topic]] = true
		c.Logger.Warn("verify: cannot read a routed topic; its rows are not verified", "topic", u.Topic, "error", u.Error)
	}
	return nil
}

// listMissingTopics counts the routed topics that do not exist (the
// dead-letter topic not among them) and names the first List of them, as
// the other lists of the report are bounded: a window routed to 100,000
// topics of 249 bytes would otherwise print 25 MB on one line.
func (v *verifier) listMissingTopics(missing []string) {
	for _, name := range missing {
		if int64(v.topics.index[name]) == v.dlq {
			continue
		}
		v.rep.MissingTopicCount++
		if len(v.rep.MissingTopics) < v.c.List {
			v.rep.MissingTopics = append(v.rep.MissingTopics, name)
		}
	}
}

// addRecord keeps what verify needs of r: nothing but a count for a
// record without a message ID or of no row of the window.
func (v *verifier) addRecord(r *publish.Record, at publish.Place) error {
	v.rep.RecordsRead++
	e := recordEntry{recordPlace: recordPlace{topic: v.topics.index[r.Topic], partition: at.Partition, offset: at.Offset, timestamp: r.Timestamp.UnixMilli()}}
	var idOK bool
	var routerID, bk []byte
	idHeader := tableformat.Shape(v.c.Format).IDHeader
	for _, h := range r.Headers {
		switch h.Key {
		case contract.HeaderMessageID:
			id, err := uuid.ParseBytes(h.Value)
			e.id, idOK = id, err == nil
		case contract.HeaderBusinessKey:
			bk, e.hasBK = h.Value, true
		case idHeader:
			routerID = h.Value
		}
	}
	// Debezium's Outbox Event Router names the row in its id header only:
	// a record of a Debezium table published before the switch to the
	// relay. Its business key is the message ID, as the relay's header
	// says for such a table.
	if id, err := uuid.ParseBytes(routerID); !idOK && idHeader != "" && err == nil {
		e.id, idOK, e.debezium = id, true, true
		if !e.hasBK {
			bk, e.hasBK = []byte(id.String()), true
		}
	}
	if !idOK {
		v.rep.RecordsWithoutID++
		return nil
	}
	// A record of no row of the window is counted now, as match would,
	// and dropped before its keys are kept (the filter lets a few
	// through: match counts those).
	if v.ids != nil && !v.ids.has(e.id) {
		v.unmatched(&e)
		return nil
	}
	e.key = v.keep(r.Key)
	if e.hasBK {
		e.businessKey = v.keep(bk)
	}
	return v.records.add(e)
}
