// Package relay publishes committed outbox rows to Kafka at-least-once, in
// commit order per aggregate, acknowledging the WAL only after Kafka did.
//
// A service writes its business change and an outbox row (package outbox)
// in one transaction. The relay tails the outbox table through logical
// replication and turns every committed row into one Kafka record. It never
// reads the table itself, so rows may be deleted once published (see
// Pruning).
//
//	cfg := &relay.Config{DatabaseURL: url, Brokers: []string{"kafka:9092"}}
//	if err := relay.Setup(ctx, cfg); err != nil { ... } // table, publication, slot
//	r, err := relay.New(cfg)
//	...
//	err = r.Run(ctx) // until ctx is cancelled
//
// # Pipeline
//
// Data flows one way: WAL -> decode -> batch -> Kafka -> acknowledgement ->
// standby status update.
//
// The WAL reader streams the slot with pgoutput (proto_version 1, so
// Postgres spills large transactions to disk instead of the relay holding
// them; messages on) for the publication, which covers the outbox table
// with publish = 'insert'. It caches relation messages and checks the
// table's columns at start and at every relation message. A missing or
// mistyped column at start ends Run with an error wrapping ErrTableColumns
// that names each one. A relation message with such columns (the table
// changed while streaming, or in the WAL being replayed) ends Run the same
// way under InvalidStop. By default the rows of that layout are invalid
// instead (reason bad-columns, the detail naming the columns) until a
// relation message brings usable columns back; stopping would leave the
// relay stuck even after the change is reverted, since every replay reads
// the WAL written meanwhile. Payload columns of type jsonb, json and text
// are sent as their text, bytea as its raw bytes.
//
// Logical decoding messages with prefix "pgoutbox" (written by
// outbox.Writer.EmitTx inside a transaction) are published exactly like
// rows, in commit order with them; other prefixes, and non-transactional
// messages (EmitTx never writes those), are ignored.
//
// Decoded events go through a bounded queue to the Kafka writer, a
// transaction at a time (queued at its commit, or BatchSize events at a
// time of a larger one), and the writer sends batches of up to BatchSize
// events (what is queued first, then what arrives within BatchTimeout)
// with one write in flight, while the reader goes on decoding the next
// batch. A write holds one produce request per
// partition, sized to stay under the topic's max.message.bytes (read from
// the cluster with DescribeConfigs, the lower of the topic's and the
// broker's message.max.bytes; else MaxMessageBytes); a larger batch goes
// in several writes, one after the other (see docs/kafka.md). The
// transaction being read, the queue and the batch being written hold at
// most BatchSize events each, and together at most BufferBytes record
// bytes (plus the one event waiting for room,
// and the Kafka client's encoded copy of the batch), so large payloads do
// not multiply the relay's memory. While they are full the reader still
// sends status updates, so a slow broker never makes the server drop the
// connection.
//
// Each record is: topic from the row's topic column, else TopicTemplate
// (default "outbox.{aggregate_type}"); key aggregate_id, partitioned with
// murmur2 like the Java client; value the payload bytes; headers
// message-id, business-key, event-type, aggregate-type, aggregate-id, then
// the row's headers object (which cannot override those); timestamp the
// transaction's commit time. Writes use acks=all.
//
// # Table formats and CloudEvents
//
// Config.TableFormat maps the columns: TableFormatPgoutbox (the table
// above) or TableFormatDebezium, the table of Debezium's Outbox Event
// Router (id, aggregatetype, aggregateid, type, payload; the message ID
// serves as business key; topic "outbox.event.{aggregate_type}"; the
// router's "id" and "type" headers besides the contract's). Both go through
// the same decoder. Config.CloudEvents adds the attributes of the
// CloudEvents Kafka binding's binary content mode (ce_specversion, ce_id,
// ce_source, ce_type, ce_time, ce_subject, content-type) to every record.
//
// # Acknowledgement
//
// The slot's confirmed_flush_lsn is the single record of what was
// published. The relay confirms the end LSN of a transaction only when
// Kafka acknowledged every event of it and of every transaction before it
// (the contiguous prefix; see internal/acktrack). Transactions with no
// outbox event complete at once, but also only in order. Status updates set
// the write, flush and apply positions explicitly; they go out at once when
// the server asks, within 100ms after the confirmed position advances (so
// a crash replays little more than what was in flight), and at least
// every StatusInterval (or a third of the liveness bound, if shorter; see
// Liveness). When nothing is in
// flight, the relay confirms the server's WAL end from its keepalives, so
// an idle outbox does not pin WAL while other tables are busy. No position
// past the catalog check's fence is confirmed (see Partitioned tables and
// renames).
//
// After any restart or reconnect, streaming resumes at confirmed_flush_lsn:
// events of the transactions in flight at the time are published again
// (consumers deduplicate on message-id, see package inbox); none is lost.
// After a server restart PG 15 moves confirmed_flush_lsn back to the
// slot's last checkpoint, minutes of WAL maybe; so at every session start
// (start, reconnect, taking over as a standby) the relay skips the
// replayed transactions that end at or before the confirmed position of
// its state row (see Gaps), which it writes only after Kafka acknowledged
// them: they are neither published again nor hold back confirmation, and
// pgoutbox_relay_replay_skipped_total counts them. Duplicates after a
// restart are then what Kafka acknowledged since the last state write
// (written at most every 200ms while events are acknowledged). A state row
// of another system or timeline skips nothing.
//
// Failed Kafka writes are retried with backoff from RetryBackoff up to
// MaxRetryBackoff and nothing after them is acknowledged meanwhile (see
// Invalid rows for the records Kafka refuses for good). A lost
// replication connection is re-opened with the same backoff. Permanent
// errors end Run with one error naming the cause (IsPermanent reports them):
// bad configuration, refused credentials or privileges, a missing slot or
// publication with NoCreate, an invalidated slot, unusable table columns at
// start, Kafka authentication or cluster authorization failures, a
// dead-letter record Kafka refuses.
//
// On cancellation Run stops reading, lets Kafka acknowledge what is in
// flight (for at most ShutdownTimeout), confirms the final position and
// returns nil.
//
// # Ordering
//
// Per aggregate, Kafka order equals commit order while nothing fails: one
// write is in flight at a time, records are sent in commit order, and
// equal keys map to one partition. A write carries one produce request
// per partition, which the broker takes or refuses whole, and after a
// write in which a record failed nothing further is sent until that
// record is written: so even a refused write (whatever the reason) adds
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
//     relay streams (see Partitioned tables and renames); its value is the
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
// MaxDeadLetterHeaderBytes (4,096) and its name to
// MaxDeadLetterHeaderNameBytes (256; a header with a longer name is left
// out). What was cut or left out is named in a dlq-truncated header (a
// header's name, original-topic, key, value, headers). Its size is checked
// last: over MaxMessageBytes it loses its value, then its key, then becomes
// the minimal record: no key, no value, only message-id, dlq-reason,
// dlq-detail (saying why), original-topic and dlq-truncated. A dead-letter
// record Kafka refuses for good is sent again as the minimal record. It
// keeps its place in the batch. With InvalidStop, Run returns an
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
// ErrKafkaAuth. Any other Kafka error is retried with backoff, forever.
//
// A topic that does not exist (UNKNOWN_TOPIC_OR_PARTITION: auto-creation
// off on the brokers, or Config.NoAutoCreateTopics) or that the relay may
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
// original-topic, relay-instance or any dlq-* name, compared without
// regard to case. Such a row is dead-lettered (reason bad-headers) and its
// dead-letter record leaves those headers out, so no row can pose as
// another message or as a dead letter. traceparent and tracestate are the
// row's: the outbox writer injects them and the relay passes them through.
//
// # Metrics
//
// Registered on Config.Registerer when it is not nil:
//
//	pgoutbox_relay_events_published_total{topic}  counter: records acknowledged by Kafka; the first 1,000
//	                                              topics have their own series, later ones count under
//	                                              OtherTopicLabel ("(other)")
//	pgoutbox_relay_publish_errors_total           counter: failed Kafka write attempts
//	pgoutbox_relay_batch_size                     histogram: events per batch
//	pgoutbox_relay_publish_duration_seconds       histogram: one Kafka write
//	pgoutbox_relay_commit_to_ack_seconds          histogram: commit timestamp to Kafka acknowledgement
//	pgoutbox_relay_confirmed_lsn                  gauge: last confirmed WAL position
//	pgoutbox_relay_progress_lsn                   gauge: exactly-once progress committed to Kafka
//	pgoutbox_relay_in_flight_events               gauge: events read and not yet acknowledged
//	pgoutbox_relay_buffer_bytes                   gauge: record bytes queued or being written (at most BufferBytes)
//	pgoutbox_relay_invalid_events_total{reason}   counter: invalid events, by reason
//	pgoutbox_relay_topic_unavailable{topic,reason} gauge: 1 while writes to the topic fail as
//	                                              unknown-topic or not-authorized, until its records are
//	                                              dead-lettered (absent otherwise)
//	pgoutbox_relay_reconnects_total               counter: replication reconnects (standby waits excluded)
//	pgoutbox_relay_pruned_rows_total              counter: outbox rows deleted by pruning
//	pgoutbox_relay_gap{slot,reason}               gauge: 1 when Run found a gap (see Gaps) and stopped
//	pgoutbox_relay_replay_skipped_total           counter: replayed transactions not published again
//	                                              because Kafka already had them (see Acknowledgement)
//
// Slot gauges, read from pg_replication_slots and pg_current_wal_lsn()
// every LagPollInterval on a regular connection, by the active relay and
// by standbys alike:
//
//	pgoutbox_relay_slot_lag_bytes{slot}             current WAL - confirmed_flush_lsn
//	pgoutbox_relay_slot_retained_wal_bytes{slot}    current WAL - restart_lsn: WAL the slot keeps on disk
//	pgoutbox_relay_slot_wal_status{slot,status}     1 for the current wal_status (reserved, extended,
//	                                                unreserved, lost), 0 for the others
//	pgoutbox_relay_slot_safe_wal_size_bytes{slot}   safe_wal_size; absent while it is NULL
//	                                                (max_slot_wal_keep_size unlimited)
//	pgoutbox_relay_slot_active{slot}                1 while some process streams the slot
//
// While the slot does not exist, the slot gauges other than slot_active
// are absent; while the database cannot be read they keep their last
// values (a warning is logged once). Gauges of this relay, computed when scraped:
//
//	pgoutbox_relay_lag_seconds{slot}              now - commit time of the oldest transaction read and not
//	                                              yet confirmed; 0 when caught up, and on a standby
//	pgoutbox_relay_seconds_since_last_ack{slot}   time since the relay last confirmed a new position or was
//	                                              caught up (or started streaming); 0 on a standby
//	pgoutbox_relay_leader{slot}                   1 while this relay streams the slot, else 0
//	pgoutbox_relay_seconds_since_server_message{slot}
//	                                              time since the relay last knew its walsender alive (see
//	                                              Liveness); rises while the server is silent and while
//	                                              the relay cannot reconnect; 0 on a standby
//
// lag_seconds counts only what the relay has read: while it is down or
// reconnecting nothing reports the events piling up in the WAL but
// slot_lag_bytes (and the scrape target being down). After a disconnect
// the relay keeps reporting the oldest transaction it held until the next
// session starts.
//
// # Standby relays
//
// Any number of relays may run on one slot; one streams it and the others
// wait. A relay whose START_REPLICATION fails with SQLSTATE 55006
// (object_in_use, the slot is active in another process) is a standby. It
// logs that once, retries every StandbyRetryInterval (without backoff and
// without counting reconnects), keeps polling the slot gauges, reports
// Ready false and leader 0. When the active relay's connection ends
// (crash, SIGKILL, stop), Postgres releases the slot and a standby takes
// over at its next try, resuming at confirmed_flush_lsn like any restart:
// events in flight at the time are published again, none is lost.
// Postgres notices a dead client through the closed TCP connection at
// once; behind a network partition it takes until wal_sender_timeout.
//
// # Liveness
//
// A relay publishes only while it knows its walsender is alive, so that a
// relay frozen past wal_sender_timeout (SIGSTOP, a VM pause, a long GC),
// whose slot the server has meanwhile handed to a standby, writes nothing
// when it resumes, and a half-open connection (a blackholing NAT or load
// balancer: no error, no FIN) is noticed in seconds, not after the
// kernel's ~15 minutes of retransmission.
//
// At session start the relay reads wal_sender_timeout on its replication
// connection (so a per-connection setting counts) and the server's clock.
// The liveness bound is wal_sender_timeout/2 (30s with the default 60s;
// 30s when the timeout is 0), and status updates go out at least every
// bound/3, each asking the server to reply. A sign of life is a server
// message, dated by the server's clock (corrected by the offset measured
// at session start, never later than its receipt); while the relay has
// been alive without a break of more than bound/2, receiving any message
// counts (a reader draining a backlog reads old data from a live
// connection), and so does its own status update while the reader waits
// for Kafka. With no sign of life for longer than the bound:
//
//   - the reader ends the session and reconnects (a "no sign of life"
//     warning; pgoutbox_relay_reconnects_total counts it);
//   - Ready (/readyz) is false and seconds_since_server_message is above
//     the bound;
//   - no byte is written to Kafka: the sink checks before each write and
//     the Kafka connections before each socket write; data read after a
//     freeze (from the socket buffer) is not queued.
//
// Why this is enough: the server gives the slot away only after hearing
// nothing for wal_sender_timeout. A live relay's last status update is at
// most bound/3 before its last sign of life, so it stops writing by
// bound + bound/3 = 2/3 of wal_sender_timeout after its last update; the
// remaining third is the margin for clock-offset error (half a round trip
// at session start, plus drift), scheduling and network delay. Clocks need
// not agree: the offset is measured, and the relay's own timing uses the
// monotonic clock, so only a step of either wall clock during a session
// matters, and only for server-dated signs after a break (they look
// fresher or older by the step; older only costs a reconnect).
//
// The window that remains: a freeze that begins after the socket write of
// a Kafka request started (the kernel sends what it was handed even while
// the process is stopped, so such a write lands before the new leader's);
// a relay whose walsender was ended some other way (pg_terminate_backend)
// while it drains a backlog without a break, until it reads the end of the
// stream (TCP_USER_TIMEOUT, set to the bound on the replication socket,
// and the new leader's own start-up time bound it); and a relay whose
// reader waits on a slow Kafka behind a middlebox that acknowledges but
// drops its status updates. Fencing Kafka writes outright would need
// transactional producers, which the Kafka client used here lacks.
// Config.InstanceID adds a relay-instance header to every record, so you
// can check which process wrote what.
//
// # Heartbeats
//
// With HeartbeatInterval > 0 the streaming relay runs, on a regular
// connection at that interval,
//
//	SELECT pg_logical_emit_message(true, 'pgoutbox.heartbeat', '')
//
// The message comes back through the slot in
// a transaction of its own; the relay publishes only messages whose prefix
// is exactly "pgoutbox", so it confirms the transaction without publishing
// anything, and confirmed_flush_lsn (and, later, restart_lsn) advance.
//
// Without it, the relay already confirms the server's WAL end from
// keepalives whenever it holds nothing, so writes to other tables and to
// other databases of the cluster do not pin WAL (PG 15 and later skip the
// empty transactions of unpublished tables and send keepalives instead;
// older versions send them as empty BEGIN/COMMIT pairs, which the relay
// confirms too). The heartbeat is for what keepalives cannot show: it is a
// real transaction decoded from the slot, so confirmed_flush_lsn (and
// pgoutbox_relay_confirmed_lsn) move every interval only while reading,
// decoding and confirming work end to end. Turn it on when the outbox can
// be idle for long and you want that proof (alert on a confirmed position
// that stops moving), or when you see the slot lag grow while the outbox
// is idle (pgoutbox_relay_slot_lag_bytes over a quiet period), for
// example behind a proxy or on a hosted service whose walsender differs.
// It costs one small WAL record per interval, and the database user must
// be allowed to execute pg_logical_emit_message (as outbox.Writer.EmitTx
// needs). A cluster with no writes at all needs nothing: there is no WAL
// to retain.
//
// # Pruning
//
// With PruneAfter > 0, Run deletes outbox rows older than PruneAfter every
// PruneInterval, at most PruneBatchSize rows per statement. Deleting can
// never lose an event: the relay reads inserts from the WAL, and the
// publication does not publish deletes. Rows a recovery could need are
// kept: the cutoff is never later than the recorded confirmed commit time
// minus BackfillMargin, and it is recorded (pruned_before) before rows are
// deleted. The table cannot say which rows
// are confirmed, though, so choose PruneAfter well above the longest
// publish delay you tolerate if you want the table to double as an audit
// trail of what was sent.
//
// # Partitioned tables and renames
//
// The relay recognises the outbox by OID, not by the name in the
// replication stream. At start it resolves the table from the catalog; at
// every relation message it asks the catalog again, and the relation is
// the outbox when it is the table the session started with (a rename is
// followed and logged; the next start under the old name fails with
// ErrTableMissing), the table the configured name resolves to now (an
// outbox replaced by a new table is followed and logged), a partition of
// either, or the relation that carried the configured name when the WAL
// was written (a replay from before a rename or replacement). Any other
// relation is a table of the publication that is not the outbox: its rows
// are invalid events with reason not-outbox (dead-lettered, or they stop
// the relay under InvalidStop), never skipped.
//
// Setup creates the publication with publish_via_partition_root = true
// (PG 13+), so rows of a partitioned outbox come under the table's own
// identity whatever partition holds them, and turns the option on for an
// existing publication. Run refuses to start (ErrPublicationMismatch, with
// the statement that fixes it) on a partitioned outbox whose publication
// lacks it, and on a publication that does not publish exactly the
// outbox's inserts: the table or inserts missing, other tables or FOR ALL
// TABLES, a row filter or a column list on the outbox. Status reports the
// same in PublicationMismatch.
//
// A catalog change can also take outbox rows out of the stream without
// anything in the stream to show it: an outbox replaced by a partitioned
// table that the publication does not include never has its rows decoded,
// even after the publication is fixed. So while streaming, every 250ms, the
// relay reads pg_current_wal_lsn() and then checks that every insert of
// the outbox is published; it never confirms past the position read
// before the last check that passed, and a failing check stops it
// (ErrPublicationMismatch, or ErrPublicationMissing for a dropped
// publication). Rows written after the change are never confirmed; they
// must be published again from the table once the publication is fixed.
// Confirmation therefore trails Kafka's acknowledgement by up to one
// check. See docs/partitioning.md for time-partitioned outbox tables with
// retention by dropping partitions, and for migrating a live outbox to a
// partitioned table.
//
// # Gaps
//
// The slot's confirmed position is only worth resuming from if it is the
// slot this relay confirmed. A failover to a physical standby (logical
// slots do not exist there before PG 17), a dropped, re-created or
// invalidated slot, a restore or a pg_upgrade each leave a slot that would
// skip every event committed since the last confirmation. Re-creating a
// missing slot on reconnect is the classic silent-loss bug of CDC tools;
// the relay never does it.
//
// It keeps one row per slot in the state table (StateTableName, in the
// outbox's schema, created by Setup or outbox.Migrate): the server's system
// identifier and timeline at slot creation, the slot's creation point, the
// last confirmed LSN and commit time, a ceiling, and prune's high-water
// mark. Being in the database, the row reaches physical standbys by
// replication. At every start and reconnect, standbys included, the relay
// compares the slot and the server with the row. Each of these is a gap: a
// slot missing while the row exists, an invalidated slot (wal_status lost),
// a slot whose confirmed_flush_lsn is past the ceiling (re-created or moved
// by someone else), another system identifier or timeline. Run then streams nothing and returns a
// *GapError (wrapping ErrGap, permanent) whose message names the slot,
// what happened and since when; pgoutbox_relay_gap is set, and Status
// reports it. Only Setup, or a first Run with no state row for the slot,
// creates a slot.
//
// The ceiling is what keeps gaps and replays apart. The relay never
// confirms past it, and raises it (to pg_current_wal_lsn(), checking that
// the slot is still its own) before it needs to, while Kafka writes are in
// flight. A slot ahead of the ceiling was therefore created or moved by
// someone else. A slot behind the recorded position is a replay, never a
// gap: PG 15 moves the confirmed position back to its last checkpoint
// after a server restart, and the row trails the slot because it is
// written rate-limited.
//
// Recover repairs a gap without loss: it creates the slot anew exporting
// its snapshot, publishes from the table, inside that snapshot, every row
// created at or after the last confirmed commit time minus BackfillMargin
// (in created_at, id order, built and written exactly like streamed rows),
// then records the new slot; Run streams on from it. With OnGap set to
// GapBackfill, Run does that itself. Rows of the margin are published
// twice; none is missing. Recover refuses with a *BackfillPrunedError when
// pruning may have deleted rows of the needed range. Logical messages
// (outbox.Writer.EmitTx) are not in the table and cannot be recovered; the
// gap error says so when the slot carried any. Backfill publishes a time
// range with the same code, to bootstrap or repair a consumer. On PG 17
// and later the slot is created with FAILOVER true, so that with
// synchronized_standby_slots it survives a promotion; that path is not
// tested here (PG 15). See docs/failover.md.
//
// # Administration
//
// Setup creates the table, the state table, the publication and the slot
// (idempotent; over a gap it refuses, like Run);
// Status reports the slot's positions, lag and WAL status, and the process
// streaming it (from pg_stat_replication), whether or not a relay runs;
// Teardown drops
// the slot and the publication and deletes the slot's state row, refusing
// while the slot is active. Status also lists, in Problems, everything
// that keeps the relay from streaming healthily (a missing table, state
// table, publication or slot, a publication mismatch, a gap, a lost slot,
// no active relay).
package relay
