package pgoutputtest

import (
	"encoding/binary"
	"slices"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"
)

func cstring(b []byte, s string) []byte { return append(append(b, s...), 0) }

// Relation encodes a relation message of the given columns and type OIDs.
func Relation(id uint32, schema, name string, cols []string, types []uint32) []byte {
	b := []byte{'R'}
	b = binary.BigEndian.AppendUint32(b, id)
	b = cstring(b, schema)
	b = cstring(b, name)
	b = append(b, 'd')
	b = binary.BigEndian.AppendUint16(b, uint16(len(cols)))
	for i, c := range cols {
		b = append(b, 0)
		b = cstring(b, c)
		b = binary.BigEndian.AppendUint32(b, types[i])
		b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	}
	return b
}

// Begin encodes a begin message.
func Begin(final uint64, ts int64, xid uint32) []byte {
	b := []byte{'B'}
	b = binary.BigEndian.AppendUint64(b, final)
	b = binary.BigEndian.AppendUint64(b, uint64(ts))
	return binary.BigEndian.AppendUint32(b, xid)
}

// Commit encodes a commit message.
func Commit(lsn, end uint64, ts int64) []byte {
	b := []byte{'C', 0}
	b = binary.BigEndian.AppendUint64(b, lsn)
	b = binary.BigEndian.AppendUint64(b, end)
	return binary.BigEndian.AppendUint64(b, uint64(ts))
}

// Insert encodes an insert of values (text format); nil is NULL.
func Insert(id uint32, vals [][]byte) []byte {
	b := []byte{'I'}
	b = binary.BigEndian.AppendUint32(b, id)
	b = append(b, 'N')
	b = binary.BigEndian.AppendUint16(b, uint16(len(vals)))
	for _, v := range vals {
		if v == nil {
			b = append(b, 'n')
			continue
		}
		b = append(b, 't')
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}

// Message encodes a logical decoding message.
func Message(transactional bool, lsn uint64, prefix string, content []byte) []byte {
	b := []byte{'M', 0}
	if transactional {
		b[1] = 1
	}
	b = binary.BigEndian.AppendUint64(b, lsn)
	b = cstring(b, prefix)
	b = binary.BigEndian.AppendUint32(b, uint32(len(content)))
	return append(b, content...)
}

// OutboxOIDs tells the outbox from other relations for a decoder under
// test: the relations of these OIDs are the outbox.
type OutboxOIDs []uint32

// IsOutbox reports whether m is one of o.
func (o OutboxOIDs) IsOutbox(m *pglogrepl.RelationMessage) (bool, error) {
	return slices.Contains(o, m.RelationID), nil
}

// Outbox holds the OIDs the tests give the outbox: 16387 (the fuzz seeds'
// "other" table) is not the outbox.
var Outbox = OutboxOIDs{16385, 16386}

// Cols are the outbox's columns, and Types their type OIDs.
var Cols = []string{"id", "aggregate_type", "aggregate_id", "event_type", "business_key", "payload", "headers", "topic", "created_at"}
var Types = []uint32{pgtype.UUIDOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.JSONBOID, pgtype.JSONBOID, pgtype.TextOID, pgtype.TimestamptzOID}
