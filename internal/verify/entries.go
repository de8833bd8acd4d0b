package verify

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/google/uuid"

	"github.com/pgoutbox/pgoutbox/internal/redact"
)

// keep is what an entry holds of a key, a business key or an aggregate ID:
// the value itself with Config.FullKeys; otherwise a digest of fixed size
// (its first characters, its length and 16 bytes of its SHA-256, see
// redact.KeyParts), so that memory and spill files are bounded per entry
// whatever a row or a record holds, and the report lists the key as the
// inbox's logs do (redact.Key). Equal keys keep equal digests.
func (v *verifier) keep(b []byte) string {
	if v.c.FullKeys {
		return string(b)
	}
	prefix, n, sum := redact.KeyParts(b)
	d := make([]byte, 0, 2+len(prefix)+binary.MaxVarintLen64+keptSum)
	d = appendString(d, prefix)
	d = binary.AppendUvarint(d, uint64(n))
	return string(append(d, sum[:keptSum]...))
}

// key is k, a kept key, as the report lists it (see keep).
func (v *verifier) key(k string) string {
	if v.c.FullKeys {
		return k
	}
	d := []byte(k)
	n, w := binary.Uvarint(d)
	prefix := string(d[w : w+int(n)])
	d = d[w+int(n):]
	length, w := binary.Uvarint(d)
	return redact.FormatKey(prefix, int(length), d[w:])
}

// keptSum is how much of a key's SHA-256 keep holds.
const keptSum = 16

// rowEntry is what verify keeps of one outbox row.
type rowEntry struct {
	id          uuid.UUID
	topic       uint32 // index into the topic table
	createdAt   int64  // Unix microseconds
	commitAt    int64  // Unix microseconds; 0 when unknown
	aggregateID string
	businessKey string
}

// recordPlace is where a Kafka record of a row is: the row's message ID,
// the record's topic, partition, offset and timestamp. Records and
// deliveries hold one.
type recordPlace struct {
	id        uuid.UUID
	topic     uint32 // index into the topic table
	partition int32
	offset    int64
	timestamp int64 // Unix milliseconds
}

// recordEntry is what verify keeps of one Kafka record.
type recordEntry struct {
	recordPlace
	key         string
	businessKey string
	hasBK       bool
	// debezium: the record names its row in Debezium's id header only
	// (Debezium published it): its timestamp is not the commit time.
	debezium bool
}

// deliveryEntry is the first delivery of a row, for the order check.
type deliveryEntry struct {
	recordPlace
	aggregateID string
}

func compareRows(a, b *rowEntry) int { return bytes.Compare(a.id[:], b.id[:]) }

func compareRecords(a, b *recordEntry) int {
	return cmp.Or(bytes.Compare(a.id[:], b.id[:]), cmp.Compare(a.topic, b.topic),
		cmp.Compare(a.partition, b.partition), cmp.Compare(a.offset, b.offset))
}

func compareDeliveries(a, b *deliveryEntry) int {
	return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition),
		cmp.Compare(a.aggregateID, b.aggregateID), cmp.Compare(a.offset, b.offset))
}

// The codecs write fixed fields and length-prefixed strings.

type rowCodec struct{}

func (rowCodec) append(dst []byte, v *rowEntry) []byte {
	dst = append(dst, v.id[:]...)
	dst = binary.AppendUvarint(dst, uint64(v.topic))
	dst = binary.AppendVarint(dst, v.createdAt)
	dst = binary.AppendVarint(dst, v.commitAt)
	dst = appendString(dst, v.aggregateID)
	return appendString(dst, v.businessKey)
}

func (rowCodec) read(r *bufio.Reader, v *rowEntry) error {
	if _, err := io.ReadFull(r, v.id[:]); err != nil {
		return err
	}
	d := decoder{r: r}
	v.topic = uint32(d.uvarint())
	v.createdAt = d.varint()
	v.commitAt = d.varint()
	v.aggregateID = d.string()
	v.businessKey = d.string()
	return d.err
}

type recordCodec struct{}

// append writes p; read reads it back. An end of file before the ID is
// io.EOF (no more values); one after it is d's truncated value.
func (p *recordPlace) append(dst []byte) []byte {
	dst = append(dst, p.id[:]...)
	dst = binary.AppendUvarint(dst, uint64(p.topic))
	dst = binary.AppendVarint(dst, int64(p.partition))
	dst = binary.AppendVarint(dst, p.offset)
	return binary.AppendVarint(dst, p.timestamp)
}

func (p *recordPlace) read(d *decoder) error {
	if _, err := io.ReadFull(d.r, p.id[:]); err != nil {
		return err
	}
	p.topic = uint32(d.uvarint())
	p.partition = int32(d.varint())
	p.offset = d.varint()
	p.timestamp = d.varint()
	return nil
}

func (recordCodec) append(dst []byte, v *recordEntry) []byte {
	dst = appendString(v.recordPlace.append(dst), v.key)
	var flags byte
	if v.hasBK {
		flags |= 1
	}
	if v.debezium {
		flags |= 2
	}
	return appendString(append(dst, flags), v.businessKey)
}

func (recordCodec) read(r *bufio.Reader, v *recordEntry) error {
	d := decoder{r: r}
	if err := v.recordPlace.read(&d); err != nil {
		return err
	}
	v.key = d.string()
	flags := d.byte()
	v.hasBK, v.debezium = flags&1 != 0, flags&2 != 0
	v.businessKey = d.string()
	return d.err
}

type deliveryCodec struct{}

func (deliveryCodec) append(dst []byte, v *deliveryEntry) []byte {
	return appendString(v.recordPlace.append(dst), v.aggregateID)
}

func (deliveryCodec) read(r *bufio.Reader, v *deliveryEntry) error {
	d := decoder{r: r}
	if err := v.recordPlace.read(&d); err != nil {
		return err
	}
	v.aggregateID = d.string()
	return d.err
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// decoder reads the fields after a value's first one; the first error
// sticks (an end of file there is a truncated file). Reads after it go on
// (the reader fails again, or the value is thrown away with the error);
// string reads no length it did not get.
type decoder struct {
	r   *bufio.Reader
	err error
}

// fail records err, unless nil or an earlier error is recorded.
func (d *decoder) fail(err error) {
	if err != nil && d.err == nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		d.err = fmt.Errorf("truncated value: %w", err)
	}
}

func (d *decoder) uvarint() uint64 {
	v, err := binary.ReadUvarint(d.r)
	d.fail(err)
	return v
}

func (d *decoder) varint() int64 {
	v, err := binary.ReadVarint(d.r)
	d.fail(err)
	return v
}

func (d *decoder) byte() byte {
	b, err := d.r.ReadByte()
	d.fail(err)
	return b
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil || n == 0 {
		return ""
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(d.r, buf); err != nil {
		d.fail(err)
		return ""
	}
	return string(buf)
}
