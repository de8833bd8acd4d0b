package decode

import (
	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
)

// numCloudEventsHeaders is how many headers appendCloudEvents adds.
const numCloudEventsHeaders = 7

// ceTimeLayout is ce_time's form: RFC 3339 in UTC to the millisecond, the
// precision of the record's timestamp (both are the commit time).
const ceTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Content types of the payload (content-type header), by its column type.
var (
	ceSpecVersion = []byte(contract.CloudEventsSpecVersion)
	ceJSON        = []byte("application/json")
	ceText        = []byte("text/plain; charset=utf-8")
	ceBytes       = []byte("application/octet-stream")
)

// contentType is the content type of a payload column of type OID t.
func contentType(t uint32) []byte {
	switch t {
	case tableformat.OIDJSON, tableformat.OIDJSONB:
		return ceJSON
	case tableformat.OIDText, tableformat.OIDVarchar:
		return ceText
	}
	return ceBytes
}

// appendCloudEvents appends the attributes of the binary content mode of
// the CloudEvents Kafka protocol binding to h: specversion 1.0, id (the
// message ID), source, type (the event type), time (the commit time),
// subject (the aggregate ID) and content-type. h[0] is the message-id
// header.
func (d *Decoder) appendCloudEvents(h []publish.Header, f *fields) []publish.Header {
	ct := f.contentType
	if ct == nil {
		ct = ceBytes
	}
	return append(h,
		publish.Header{Key: contract.HeaderCESpecVersion, Value: ceSpecVersion},
		publish.Header{Key: contract.HeaderCEID, Value: h[0].Value},
		publish.Header{Key: contract.HeaderCESource, Value: d.ceSource},
		publish.Header{Key: contract.HeaderCEType, Value: nonNil(f.eventType)},
		publish.Header{Key: contract.HeaderCETime, Value: d.CommitTime.UTC().AppendFormat(nil, ceTimeLayout)},
		publish.Header{Key: contract.HeaderCESubject, Value: nonNil(f.aggregateID)},
		publish.Header{Key: contract.HeaderContentType, Value: ct},
	)
}
