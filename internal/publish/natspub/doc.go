// Package natspub is the relay's NATS JetStream publisher ("nats", a
// publish.Publisher): each record goes to a subject of the stream that
// captures it, confirmed by the stream's PubAck.
//
// # Subjects and order
//
// A record's subject is its topic (the topic column or the topic template,
// "outbox.{aggregate_type}") followed by the aggregate's hash bucket: the
// FNV-1a hash of the key modulo Config.Buckets, so "outbox.payment.3".
// Every record of one aggregate lands on one subject, in commit order; a
// consumer that wants parallelism filters one subject per bucket
// ("outbox.payment.3"), one that does not takes "outbox.payment.>". The
// stream that captures the subjects is the operator's (docs/sinks.md): a
// record whose subject no stream captures is reported unavailable
// (publish.TopicUnavailable, reason unknown-topic) until one does.
//
// # Deduplication
//
// The Nats-Msg-Id header is the record's message ID (the message-id
// header): within the stream's duplicate window (Duplicates, 2 minutes by
// default) JetStream stores a repeated ID once and acknowledges the repeat
// as a duplicate, so a replay after a crash inside the window adds
// nothing. Past the window a replay can repeat a message; the inbox
// (pkg/inbox/inboxnats) makes its effect happen once.
//
// # Headers
//
// The record's headers (the message contract: message-id, business-key,
// event-type, aggregate-type, aggregate-id, trace context, then the row's
// own) become NATS headers under the same names, byte for byte.
//
// # Confirmation and atomic batches
//
// Write returns once the stream stored every record (on a replicated
// stream, a quorum did). To a stream that takes atomic batches
// (AllowAtomicPublish, nats-server 2.12 and later) the records of a Write
// go as atomic batches of at most 1,000 (orbit.go's jetstreamext, the
// maintained client of the batch protocol): the stream stores a batch
// whole or not at all and confirms it with one acknowledgement; the
// session's guard is asked before each batch. A batch the server refuses
// (one holding a message ID within the duplicate window: a replay; a
// record it refuses) is written again record by record, so each record
// still has its own outcome. To any other stream the records go one by
// one, asynchronously and in order, each confirmed by its PubAck. Run
// the server with sync_interval: always for an acknowledgement that
// survives a power loss (docs/sinks.md).
//
// # Reading back
//
// Read (publish.Reader) reads a topic's subjects from the streams that
// capture them through an ephemeral consumer, up to what they held when
// the read began: relay verify and recovery's "already there" check.
package natspub
