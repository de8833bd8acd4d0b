// Package sink is the relay's broker-neutral sink stage: it takes events
// from the queue in batches, writes them through a broker's publisher
// (publish.Publisher, chosen by name: internal/publish/kafkapub for Kafka,
// the default), tells the ack tracker what the broker confirmed, and
// decides which records are dead-lettered. The broker's client, its error
// table, fencing and where progress is kept are the publisher's (see
// docs/layout.md, The sink boundary).
//
// Sink.Run reads collect → publish → ack: a collector gathers a batch from
// the queue, and the session's mode, one of two halves, writes it and says
// what to acknowledge. atLeastOnce (sink.go) writes through the publisher,
// retrying failed records in place, and acknowledges the whole batch;
// transactional (exactlyonce.go) writes the batch into a transaction of a
// publish.Transactional, committed with its progress, and acknowledges only
// what a commit made visible. What follows names Kafka's behaviour, the
// default publisher's; another broker's publisher maps its own answers to
// the same verdicts.
//
// # Ordering
//
// Per aggregate, Kafka order equals commit order while nothing fails: one
// write is in flight at a time, records are sent in commit order, and
// equal keys map to one partition. The idempotent producer keeps a
// partition's records in order across its requests and never duplicates
// one on a retry, and after a write in which a record failed nothing
// further is sent until that record is written: so even a refused write (whatever the reason) adds
// no duplicate and breaks no order within the batch. Should a later
// record of a failed record's key have been written anyway, it is sent
// again after it. The guarantee is: for two events i and j of one
// aggregate with i committed before j, the last copy of i in the
// partition precedes the last copy of j. A consumer that
// deduplicates on message-id and keeps the latest state per aggregate
// sees commit order. A replay after a reconnect can also repeat earlier
// records (the same guarantee holds for the last copies).
//
// # Invalid rows
//
// A row the relay cannot publish as it is never stalls the relay and is
// never dropped silently. The reasons, in the dlq-reason header and the
// reason label:
//
//   - null-column: NULL in a required column.
//   - too-large: a record over MaxMessageBytes, or rejected by the broker
//     as too large.
//   - bad-value: a message ID that is not a UUID, bytea that does not
//     decode.
//   - unsupported-type: a value in a form the relay cannot read.
//   - bad-headers: headers that are not a JSON object, or that name a
//     header the relay writes itself (see Reserved headers).
//   - bad-topic: not a legal Kafka topic name (1 to 249 bytes of a-z A-Z
//     0-9 . _ -, not "." or ".."), the dead-letter topic (a row may not
//     pose as a dead letter), or a topic outside Config.AllowedTopics.
//   - bad-message: a pgoutbox logical message that does not parse.
//   - kafka-rejected: a record Kafka refuses for good (see below).
//   - bad-columns: a row of a table layout the relay cannot read (see
//     Pipeline).
//   - invalid-key: a business key that no inbox could claim, because it is
//     empty, not valid UTF-8, holds a NUL byte or is longer than the
//     contract's MaxKeyBytes (1024 bytes).
//   - not-outbox: a row of a table added to the publication while the
//     relay streams (see Partitioned tables and renames in internal/slotstate); its value is the
//     row as a JSON object of column texts.
//   - topic-unavailable: a record whose topic did not exist or could not be
//     written for longer than TopicUnavailableGrace (see below).
//
// With OnInvalid = InvalidDeadLetter (the default) the event goes to
// DeadLetterTopic (default "outbox.dlq") with its key and value (no value
// for too-large), the headers dlq-reason, dlq-detail, original-topic (when
// known) and message-id, plus its normal headers; it is counted in
// pgoutbox_relay_invalid_events_total and logged at Warn with its message
// ID and bounded excerpts (never a whole value). Its headers are bounded
// whatever the row holds: dlq-detail to 1,024 bytes, original-topic to 249
// (a longer, illegal topic is cut), every other header's value to
// decode.MaxDeadLetterHeaderBytes (4,096) and its name to
// decode.MaxDeadLetterHeaderNameBytes (256; a header with a longer name is left
// out). What was cut or left out is named in a dlq-truncated header (a
// header's name, original-topic, key, value, headers). Its size is checked
// last: over MaxMessageBytes it loses its value, then its key, then becomes
// the minimal record: no key, no value, only message-id, dlq-reason,
// dlq-detail (saying why), original-topic and dlq-truncated. A dead-letter
// record Kafka refuses for good is sent again as the minimal record. It
// keeps its place in the batch. (The shaping is decode.DeadLetters: the
// WAL reader and backfill call it, the sink only for what Kafka refuses.) With InvalidStop, Run returns an
// *InvalidEventError naming the message ID and reason, and the transaction
// holding it is not confirmed.
//
// Kafka's answer decides too. A record the brokers refuse for good is
// invalid. Refused as too large (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE),
// its reason is too-large; refused for its topic or content
// (INVALID_TOPIC_EXCEPTION, POLICY_VIOLATION, INVALID_RECORD,
// INVALID_TIMESTAMP, UNSUPPORTED_FOR_MESSAGE_FORMAT), kafka-rejected, with
// Kafka's error in dlq-detail. CORRUPT_MESSAGE may pass, so it makes a record
// invalid only after 5 attempts over at least 5 seconds. When a write of
// several records fails that way, the relay writes them one by one to
// find which is at fault. Kafka refusing even the minimal dead-letter
// record ends Run with an error wrapping ErrDeadLetter, the only row that
// can stop the relay; SASL and cluster authorization failures end it with
// ErrKafkaAuth. Any other Kafka error is retried with backoff, forever. In
// exactly-once mode each refusal aborts the transaction and ends the
// session; the refusals of a record are kept by WAL position across
// sessions, so it escalates the same way, a session per step.
//
// A topic that does not exist (UNKNOWN_TOPIC_OR_PARTITION: auto-creation
// off on the brokers, or relay.KafkaConfig.NoAutoCreateTopics) or that the relay may
// not write (TOPIC_AUTHORIZATION_FAILED) is first the operator's to fix: a
// topic provisioned late, a missing ACL. The relay retries with backoff,
// sets pgoutbox_relay_topic_unavailable{topic,reason} to 1 and logs a
// warning; nothing after the waiting record is published meanwhile. Once
// the topic exists or the ACL is granted, everything is delivered. If it
// lasts longer than TopicUnavailableGrace (default 5m), the record is
// dead-lettered with reason topic-unavailable (OnUnavailableTopic =
// UnavailableDeadLetter, the default, so a row naming a topic that does not
// exist cannot stop the relay), the gauge is removed, and later records of
// the topic are dead-lettered at their first failed write until a write to
// it succeeds or it has not failed for twice TopicUnavailableGrace (at
// least a minute). With
// UnavailableStop, Run ends instead with an error wrapping
// ErrTopicUnavailable naming the topic and the waiting message; its
// transaction is not confirmed, so a restart after the fix publishes it. A
// dead-letter topic that is unavailable that long always ends Run so.
// At most 1,024 topics are tracked as unavailable at once (the one whose
// last failure is oldest is dropped).
//
// # Reserved headers
//
// A row's headers object may not name a header the relay writes:
// message-id, business-key, event-type, aggregate-type, aggregate-id,
// original-topic, relay-instance, pgoutbox-progress or any dlq-* name, compared without
// regard to case. Such a row is dead-lettered (reason bad-headers) and its
// dead-letter record leaves those headers out, so no row can pose as
// another message or as a dead letter. traceparent and tracestate are the
// row's: the outbox writer injects them and the relay passes them through.
package sink
