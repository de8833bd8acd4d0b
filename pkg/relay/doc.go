// Package relay publishes committed outbox rows to Kafka at-least-once, in
// commit order per aggregate, acknowledging the WAL only after Kafka did.
//
// A service writes its business change and an outbox row (package outbox)
// in one transaction. The relay tails the outbox table through logical
// replication and turns every committed row into one Kafka record. It never
// reads the table itself, so rows may be deleted once published (see
// Pruning).
//
//	cfg := &relay.Config{DatabaseURL: url, Kafka: relay.KafkaConfig{Brokers: []string{"kafka:9092"}}}
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
// Each stage is a package of its own, whose documentation holds that
// part of the design:
//
//	internal/wal         reads the slot (pgoutput), confirms to the server, skips replays
//	internal/decode      turns rows and logical messages into Kafka records, or invalid events, and shapes dead letters
//	internal/queue       hands events from the reader to the sink, bounded in events and bytes
//	internal/sink        batches, writes through internal/producer (at-least-once or transactional)
//	internal/producer    the franz-go kgo client: idempotent, acks=all, murmur2 keys
//	internal/acktrack    which position may be confirmed: a contiguous prefix of acknowledged transactions
//	internal/slotstate   the slot, the publication, the catalog fence, the state row and gaps
//	internal/pgconnect   the Postgres connections, and the liveness clock that guards them
//
// The errors' classification (internal/relayerr), the metrics
// (internal/relaymetrics) and the administrative calls (internal/admin)
// have packages of their own too; docs/layout.md has the import layers.
// Config and the policies are declared here and seen by no stage (the
// SASL configuration, which the inbox shares, in the leaf package
// kafkasasl):
// New derives from Config the small config each stage declares (stages.go).
// The types and values both sides name are declared once, with their
// documentation, in package relaytype, which the engine imports too, and
// this package's functions name them from there (as river's API names
// rivertype.JobRow): Status returns a *relaytype.SlotStatus, Run's errors
// wrap relaytype.ErrGap and the others (errors.Is, errors.As), and
// Config.TableFormat takes relaytype.TableFormatDebezium; the dead-letter
// reasons (relaytype.ReasonTooLarge...) and the Verify types are there too.
// What a user relies on is summed up in docs/semantics.md (acknowledgement,
// ordering, gaps),
// docs/kafka.md (records, invalid rows, dead letters) and docs/liveness.md.
//
// # Table formats and CloudEvents
//
// Config.TableFormat maps the columns: relaytype.TableFormatPgoutbox (the
// table above) or relaytype.TableFormatDebezium, the table of Debezium's
// Outbox Event Router (id, aggregatetype, aggregateid, type, payload; the message ID
// serves as business key; topic "outbox.event.{aggregate_type}"; the
// router's "id" and "type" headers besides the contract's). Both go through
// the same decoder. Config.CloudEvents adds the attributes of the
// CloudEvents Kafka binding's binary content mode (ce_specversion, ce_id,
// ce_source, ce_type, ce_time, ce_subject, content-type) to every record.
//
// # Metrics
//
// Registered on Config.Registerer when it is not nil:
//
//	pgoutbox_relay_events_published_total{topic}  counter: records acknowledged by Kafka; the first 1,000
//	                                              topics have their own series, later ones count under
//	                                              relaytype.OtherTopicLabel ("(other)")
//	pgoutbox_relay_publish_errors_total           counter: failed Kafka write attempts
//	pgoutbox_relay_batch_size                     histogram: events per batch
//	pgoutbox_relay_publish_duration_seconds       histogram: one Kafka write
//	pgoutbox_relay_commit_to_ack_seconds          histogram: commit timestamp to Kafka acknowledgement
//	pgoutbox_relay_confirmed_lsn                  gauge: last confirmed WAL position
//	pgoutbox_relay_progress_lsn                   gauge: exactly-once progress committed to Kafka
//	pgoutbox_relay_progress_ignored_total{reason} counter: progress records not trusted at a session start
//	pgoutbox_relay_in_flight_events               gauge: events read and not yet acknowledged
//	pgoutbox_relay_buffer_bytes                   gauge: record bytes queued or being written (at most BufferBytes)
//	pgoutbox_relay_invalid_events_total{reason}   counter: invalid events, by reason
//	pgoutbox_relay_topic_unavailable{topic,reason} gauge: 1 while writes to the topic fail as
//	                                              unknown-topic or not-authorized, until its records are
//	                                              dead-lettered (absent otherwise)
//	pgoutbox_relay_reconnects_total               counter: replication reconnects (standby waits excluded)
//	pgoutbox_relay_pruned_rows_total              counter: outbox rows deleted by pruning
//	pgoutbox_relay_gap{slot,reason}               gauge: 1 when Run found a gap (see Gaps in internal/slotstate) and stopped
//	pgoutbox_relay_replay_skipped_total           counter: replayed transactions not published again
//	                                              because Kafka already had them (see Acknowledgement in internal/wal)
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
//	pgoutbox_relay_slot_standby_slots_inactive{slot}
//	                                                for a failover slot (PG 17+): the slots named in
//	                                                synchronized_standby_slots that no standby streams;
//	                                                above 0 the primary sends the relay nothing new
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
