package verify

import (
	"bytes"
	"time"
)

// maxOffsetsListed caps the offsets a Duplicate names.
const maxOffsetsListed = 10

// match walks the rows and the records together in message-ID order: a
// streaming merge join, holding one row and one record at a time.
func (v *verifier) match() error {
	rows, err := v.rows.sorted()
	if err != nil {
		return err
	}
	defer rows.close()
	recs, err := v.records.sorted()
	if err != nil {
		return err
	}
	defer recs.close()
	cur := recordCursor{m: recs}
	if err := cur.advance(); err != nil {
		return err
	}
	for {
		row, ok, err := rows.next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		for cur.more && bytes.Compare(cur.rec.id[:], row.id[:]) < 0 {
			v.unmatched(&cur.rec)
			if err := cur.advance(); err != nil {
				return err
			}
		}
		got, err := v.recordsOf(&row, &cur)
		if err != nil {
			return err
		}
		if err := v.account(&row, &got); err != nil {
			return err
		}
	}
	for cur.more {
		v.unmatched(&cur.rec)
		if err := cur.advance(); err != nil {
			return err
		}
	}
	return nil
}

// recordCursor is the records' merge position: rec is the next record
// while more.
type recordCursor struct {
	m    *merger[recordEntry]
	rec  recordEntry
	more bool
}

func (c *recordCursor) advance() (err error) {
	c.rec, c.more, err = c.m.next()
	return err
}

// rowRecords is what the records of one row say.
type rowRecords struct {
	n       int          // records of the row
	first   *recordEntry // its first in its own topic
	inDLQ   bool         // one is in the dead-letter topic
	offsets []Offset     // where they are, at most maxOffsetsListed
}

// recordsOf consumes the records of row at cur, checking each against it.
func (v *verifier) recordsOf(row *rowEntry, cur *recordCursor) (rowRecords, error) {
	var got rowRecords
	for cur.more && cur.rec.id == row.id {
		rec := cur.rec
		got.n++
		switch {
		case int64(rec.topic) == v.dlq:
			got.inDLQ = true
		case rec.topic == row.topic && got.first == nil:
			got.first = &rec
		}
		v.check(row, &rec)
		if len(got.offsets) < maxOffsetsListed {
			got.offsets = append(got.offsets, v.offset(&rec))
		}
		if err := cur.advance(); err != nil {
			return got, err
		}
	}
	return got, nil
}

// account counts row as found, dead-lettered, unreadable, pending or
// missing, and its duplicates, and keeps its first delivery for the order
// check.
func (v *verifier) account(row *rowEntry, got *rowRecords) error {
	switch first := got.first; {
	case first != nil:
		v.rep.Found++
		// Debezium's record has no place in the order check: its
		// timestamp is not the commit time.
		if first.debezium {
			break
		}
		if err := v.deliveries.add(deliveryEntry{recordPlace: first.recordPlace, aggregateID: row.aggregateID}); err != nil {
			return err
		}
	case got.inDLQ:
		v.rep.DeadLettered++
	case got.n > 0:
		v.rep.Found++ // in another topic: check reported the mismatch
	case v.unreadable[row.topic]:
		v.rep.UnreadableRows++
	case row.createdAt >= v.rep.Started.Add(-v.c.Grace).UnixMicro():
		v.rep.Pending++
	default:
		v.rep.Missing++
		v.listMissing(row)
	}
	if got.n > 1 {
		v.rep.Duplicates += int64(got.n - 1)
		v.rep.DuplicatedRows++
		if len(v.rep.DuplicateRows) < v.c.List {
			v.rep.DuplicateRows = append(v.rep.DuplicateRows, Duplicate{ID: row.id.String(), Records: got.n, Offsets: got.offsets})
		}
	}
	return nil
}

// check compares a record with its row (dead letters excepted: the relay
// may have slimmed them).
func (v *verifier) check(row *rowEntry, rec *recordEntry) {
	if int64(rec.topic) == v.dlq {
		return
	}
	bad := false
	mismatch := func(field, want, got string) {
		bad = true
		if len(v.rep.MismatchRecords) < v.c.List {
			v.rep.MismatchRecords = append(v.rep.MismatchRecords, Mismatch{ID: row.id.String(), Offset: v.offset(rec), Field: field, Want: want, Got: got})
		}
	}
	if rec.topic != row.topic {
		mismatch("topic", v.topics.names[row.topic], v.topics.names[rec.topic])
	}
	if rec.key != row.aggregateID {
		mismatch("key", v.key(row.aggregateID), v.key(rec.key))
	}
	if !rec.hasBK || rec.businessKey != row.businessKey {
		mismatch("business-key", v.key(row.businessKey), v.key(rec.businessKey))
	}
	if bad {
		v.rep.Mismatched++
	}
}

// unmatched counts a record of no row of the window.
func (v *verifier) unmatched(rec *recordEntry) {
	v.rep.Unmatched++
	if p := v.rep.PrunedBefore; p != nil && rec.timestamp >= v.c.From.UnixMilli() && rec.timestamp < p.UnixMilli() {
		v.rep.Unverifiable++
	}
}

// listMissing keeps the List earliest missing rows by creation time.
func (v *verifier) listMissing(row *rowEntry) {
	l := v.rep.MissingRows
	created := time.UnixMicro(row.createdAt).UTC()
	if len(l) >= v.c.List && (len(l) == 0 || !created.Before(l[len(l)-1].CreatedAt)) {
		return
	}
	m := MissingRow{ID: row.id.String(), Topic: v.topics.names[row.topic], CreatedAt: created}
	if row.commitAt != 0 {
		t := time.UnixMicro(row.commitAt).UTC()
		m.CommitTime = &t
	}
	i := len(l)
	for i > 0 && created.Before(l[i-1].CreatedAt) {
		i--
	}
	if len(l) < v.c.List {
		l = append(l, MissingRow{})
	}
	copy(l[i+1:], l[i:])
	l[i] = m
	v.rep.MissingRows = l
}

// checkOrder walks the first deliveries by topic, partition, aggregate and
// offset: within an aggregate, a commit time (record timestamp) earlier
// than one already delivered is an order break.
func (v *verifier) checkOrder() error {
	ds, err := v.deliveries.sorted()
	if err != nil {
		return err
	}
	defer ds.close()
	var prev, top deliveryEntry
	started := false
	for {
		d, ok, err := ds.next()
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if !started || d.topic != prev.topic || d.partition != prev.partition || d.aggregateID != prev.aggregateID {
			started, prev, top = true, d, d
			continue
		}
		prev = d
		if d.timestamp >= top.timestamp {
			top = d
			continue
		}
		v.rep.OrderBreaks++
		if len(v.rep.OrderBreakList) < v.c.List {
			v.rep.OrderBreakList = append(v.rep.OrderBreakList, OrderBreak{
				AggregateID: v.key(d.aggregateID), ID: d.id.String(),
				At:         Offset{Topic: v.topics.names[d.topic], Partition: d.partition, Offset: d.offset},
				CommitTime: time.UnixMilli(d.timestamp).UTC(),
				AfterID:    top.id.String(), AfterOffset: top.offset, AfterCommit: time.UnixMilli(top.timestamp).UTC(),
			})
		}
	}
}

func (v *verifier) offset(rec *recordEntry) Offset {
	return Offset{Topic: v.topics.names[rec.topic], Partition: rec.partition, Offset: rec.offset}
}
