// Package inbox makes the effects of at-least-once Kafka deliveries happen
// once: each message is deduplicated on its message ID and business key inside
// the consumer's own database transaction, so the handler's writes and the
// inbox record commit or roll back together. Redeliveries are acknowledged
// without running the handler again; failures are retried and finally
// dead-lettered; conflicts are dead-lettered (or stop the loop), never
// acknowledged silently.
//
// # Table
//
// Migrate creates the inbox table (default public.inbox; the same statements
// as sql/inbox/*.up.sql, which a DBA may apply with psql -f instead), on the
// driver an Inbox takes (Migrate(ctx, Pgx(pool), "")). Rows are
// keyed by PRIMARY KEY (consumer, message_id) and UNIQUE (consumer,
// business_key) and move through RECEIVED -> PROCESSING -> COMPLETED, or
// FAILED_RETRYABLE -> ... -> FAILED_FINAL. The transactional path writes a
// new row COMPLETED at once (nobody sees it before the commit); PROCESSING
// is the committed claim of the two-phase path; RECEIVED is an attempt the
// consumer loop counted before starting it, which stays RECEIVED only when
// that attempt never ended (see Crash loops). The key columns use COLLATE "C":
// they are compared for equality only, and byte comparison keeps the unique
// indexes cheap on databases whose default collation is linguistic
// (migration 002 converts an existing table, rebuilding the two unique
// indexes under an exclusive lock).
//
// # Drivers
//
// An Inbox works on one database through its Driver, and its type parameter
// is the driver's transaction type: New(Pgx(pool), cfg) returns an
// *Inbox[pgx.Tx], New(SQL(db), cfg) an *Inbox[*sql.Tx]. Process, ProcessTx,
// ProcessExternal, the consumer loop (inboxkafka.Config[TTx]) and the
// dead-letter writer are one family of calls for both; the handler types
// are TxHandler[TTx] and ExternalHandler.
//
// # Transactional path
//
// Process begins a transaction, claims the message with INSERT ... ON
// CONFLICT DO NOTHING RETURNING as its first statement, runs the handler with
// that transaction, marks the row COMPLETED with the handler's result
// reference and commits. A concurrent delivery of the same message blocks on
// the unique index until the first transaction ends, then sees the committed
// row and answers Duplicate. ProcessTx does the same inside a transaction
// the caller owns (the claim and the handler run in a savepoint; a non-nil
// error rolls the savepoint back, claim included, and the caller should
// roll its transaction back).
//
//	in, err := inbox.New(inbox.Pgx(pool), &inbox.Config{Consumer: "billing"})
//	...
//	res, err := in.Process(ctx, msg, func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
//		_, err := tx.Exec(ctx, `UPDATE account SET balance = balance - 10 WHERE id = $1`, id)
//		return "", err
//	})
//
// # database/sql
//
// Applications on database/sql (and so on sqlx, GORM, ent and bun, which
// hand out the *sql.DB and *sql.Tx underneath) make their Inbox with the SQL
// driver, on a SQLBeginner (a *sql.DB or *sql.Conn): the calls are the same,
// the handlers get the *sql.Tx, and ProcessTx takes the caller's *sql.Tx.
// The claim, the state machine, the leases, the batch path and every
// guarantee are the same code as on pgx; ProcessTx's savepoints are
// SAVEPOINT statements. Use pgx's
// stdlib driver (github.com/jackc/pgx/v5/stdlib, driver name "pgx", or
// stdlib.OpenDBFromPool to share a pgxpool): the batch path passes Go slices
// as arrays, and errors are classified by SQLSTATE through *pgconn.PgError.
// Migrate and NewStore take the same driver (see the example of SQL).
//
//	in, err := inbox.New(inbox.SQL(db), &inbox.Config{Consumer: "billing"})
//	...
//	res, err := in.Process(ctx, msg, func(ctx context.Context, tx *sql.Tx, msg inbox.Message) (string, error) {
//		_, err := tx.ExecContext(ctx, `UPDATE account SET balance = balance - 10 WHERE id = $1`, id)
//		return "", err
//	})
//
// # Outcomes
//
// Every delivery has one Outcome:
//   - Processed: the handler ran and committed.
//   - Duplicate: the same message ID, or another ID with the same business key
//     and payload, was processed before; the stored result reference is returned.
//   - Conflict: the same message ID with another business key or payload, or
//     the same business key with another payload (payloads are compared by
//     their digest, Config.PayloadHash, sha256 by default).
//     Config.ConflictPolicy decides: ConflictPolicyDeadLetter, the default,
//     answers DeadLettered with reason "conflict" (the consumer loop writes
//     the record to the dead-letter topic with both sides of the conflict in
//     dlq-conflict-* headers and goes on); ConflictPolicyStop answers
//     Conflict with an error wrapping ErrConflict (a *ConflictError), the
//     message is not acknowledged and the consumer loop stops with an error
//     naming the record.
//   - Busy: another worker holds a live PROCESSING lease (two-phase path).
//   - Retry: the handler failed; the attempt was recorded.
//   - DeadLettered: the message is FAILED_FINAL; the handler does not run.
//
// Outcome.Acked says which outcomes settle a delivery (Processed, Duplicate,
// DeadLettered). Process's error is non-nil only when the outcome is unknown,
// so a nil error does not mean "commit the offset". A consumer loop of your
// own (any Kafka client, see KafkaRecord) hands each record to Deliver,
// which processes it, writes the dead letter of a DeadLettered message
// (DeadLetterWriter.Settle), processes the same record again after a backoff
// while the outcome is not settled, and returns nil when the offset may be
// committed (the example of KafkaRecord.Message is such a loop).
//
// Serialization failures (40001) and deadlocks (40P01) are detected by
// SQLSTATE and retried transparently, up to Config.TxRetries times; beyond
// that they count as a failed attempt, like a handler error.
//
// # Conflicts and volatile payload fields
//
// A producer that re-emits an event with a new message ID and a payload
// holding a fresh timestamp makes a conflict, not a duplicate. Hash only the
// stable fields with Config.PayloadHash:
//
//	PayloadHash: func(m *inbox.Message) []byte {
//		var p struct {
//			Account string `json:"account"`
//			Amount  int64  `json:"amount"`
//		}
//		if json.Unmarshal(m.Payload, &p) != nil {
//			return inbox.SHA256Payload(m)
//		}
//		h := sha256.Sum256(fmt.Appendf(nil, "%q|%d", p.Account, p.Amount))
//		return h[:]
//	},
//
// Changing the function turns redeliveries of already stored messages into
// conflicts: set it before the first message.
//
// # CloudEvents
//
// A record without a message-id header but with ce_id is read as a
// CloudEvent in binary content mode (the CloudEvents Kafka protocol
// binding, as any CloudEvents SDK writes it): message ID = ce_id, business
// key = the business-key header, else the ce_businesskey extension
// attribute, else ce_id; event type = the event-type header, else ce_type.
// Message.Headers then also holds message-id, business-key and event-type
// as read. A repeated ce_id, ce_businesskey or ce_type is a repeated
// contract header. Records with the relay's headers are read by them, even
// when they carry CloudEvents headers too. Structured mode (the event as a
// JSON value) is not read. See KafkaRecord.Message.
//
// # Invalid keys
//
// A message ID or business key must be non-empty, valid UTF-8, free of NUL
// bytes and at most MaxKeyBytes (1024) bytes long; Postgres could not store
// or index anything else. Process, ProcessTx and ProcessExternal return
// ErrInvalidMessage for such a message before touching the table; the
// consumer loop dead-letters it with reason "invalid-key" (a record without
// the headers: "missing-headers"). A record that repeats a contract header
// (message-id, business-key, event-type, aggregate-type, aggregate-id; in
// any case) is invalid too (RepeatedHeaderError): no copy is picked, since a
// forged second one could change what is deduplicated; the consumer loop
// dead-letters it with reason "repeated-header". A record the database refuses for its
// content in some other way (SQLSTATE class 22 or 54) is dead-lettered with
// reason "max-attempts" after Config.MaxAttempts deliveries, counted in
// memory when no inbox row can hold the count. None of them blocks its
// partition.
//
// # Failures
//
// A handler error rolls the business writes back. The attempt count, the
// error text and FAILED_RETRYABLE are then recorded in a separate short
// transaction so they survive the rollback. At Config.MaxAttempts, or at once
// for an error wrapped with Permanent, the row becomes FAILED_FINAL and the
// outcome is DeadLettered (reason "max-attempts" or "permanent"); later
// deliveries answer DeadLettered (reason "failed-final") without running the
// handler. Store.Revive (command "inbox revive") makes such a message
// processable again.
//
// A handler that panics is recovered: the panic is logged at Error with its
// stack and counted as a failed attempt with a *PanicError, exactly like a
// returned error. Process, ProcessTx and ProcessExternal never propagate it.
//
// # Crash loops
//
// A handler that kills the process (SIGKILL, the OOM killer, a fatal
// runtime error) leaves nothing behind on the transactional path: its
// attempt rolls back with the claim. So the consumer loop counts an attempt
// in its own short transaction before it starts it (a RECEIVED row, attempts
// + 1) whenever the delivery may repeat one that killed a process: for the
// first inboxkafka.Config.BatchSize messages of a partition after the loop
// starts or the partition is assigned to it, and after the offsets go back
// (a redelivery). Those messages are handled one at a time. A message
// whose Config.MaxAttempts counted attempts all ended without an outcome is
// made FAILED_FINAL instead of run again and is dead-lettered (reason
// "max-attempts"), and the records behind it proceed: N kills in a row on
// one message end in the dead-letter topic. Messages outside that window, the
// steady state, cost nothing extra. The two-phase path needs no marker: its
// committed PROCESSING claim and lease count the attempts.
//
// # External side effects
//
// For effects outside the database (a payment gateway, an e-mail),
// ProcessExternal commits a PROCESSING claim with a lease of
// Config.LeaseDuration, calls the handler outside any transaction with the
// business key as the idempotency key to pass to the external system, then
// records COMPLETED and the result reference. A delivery meeting a live lease
// answers Busy; one meeting an expired lease takes the message over with the
// same key and attempt count + 1 — unless Config.MaxAttempts attempts were
// made: then the message becomes FAILED_FINAL and is DeadLettered (reason
// "max-attempts") without calling the handler, so a handler that crashes the
// process every time is not retried forever. A handler finishing after
// losing its lease gets ErrLeaseLost and does not overwrite the new owner's
// record; the lease's end (locked_until) is the fencing token, so this holds
// even after Revive reset the attempt count. The handler's ctx ends with its
// lease (context.Cause is ErrLeaseExpired); ExtendLease moves the lease end
// for a long call, and LeaseDeadline tells when it is, to bound an external
// request by it.
//
// # Reconciliation without idempotency keys
//
// Some external APIs take no idempotency key: after a crash or a timeout the
// next attempt must first ask the provider what the previous one did. The
// handler learns which attempt it runs from AttemptFromContext (the attempt
// number, when the previous attempt started, and the request reference it
// saved); SaveRequestRef records a reference (say, the request ID sent to the
// provider) in its own short statement, fenced by the lease, before calling
// out; and returning ErrAlreadyDone with the result reference records
// COMPLETED without a new call (Result.Reconciled). Query-status
// reconciliation, as a handler:
//
//	a, _ := inbox.AttemptFromContext(ctx)
//	if a.PreviousRequestRef != "" {
//		if ch, found, err := provider.Lookup(ctx, a.PreviousRequestRef); err != nil {
//			return "", err
//		} else if found {
//			return ch.ID, inbox.ErrAlreadyDone
//		}
//	}
//	ref := fmt.Sprintf("%s/%d", key, a.Number)
//	if err := inbox.SaveRequestRef(ctx, ref); err != nil {
//		return "", err // lease lost: another delivery owns the message
//	}
//	ch, err := provider.Charge(ctx, ref, amount)
//	return ch.ID, err
//
// Reserve then confirm works the same way: save the reservation ID, and a
// takeover confirms the saved reservation (or asks whether it was confirmed)
// instead of reserving again.
//
// # Kafka consumer loop
//
// Package inboxkafka is the Kafka consumer loop of an Inbox, on franz-go:
// read_committed by default, one worker per partition, offsets committed
// only after the database commit, dead letters, rebalances from the
// client's callbacks. Consumers with loops of their own call Process,
// ProcessTx or ProcessExternal with KafkaRecord.Message and settle with
// DeadLetterWriter; those with kafka-go readers convert each kafka.Message
// through package inboxkafkago.
//
// # Retention
//
// Store is the admin API (the command inbox is built on it; NewStore takes
// the driver an Inbox takes): Store.Counts, Store.List, Store.Purge and
// Store.Revive, for one consumer or all of them.
// Store.Purge deletes COMPLETED rows older than a retention in
// small batches; FAILED_FINAL rows stay until revived or purged explicitly.
// A purged message is no longer recognised as a duplicate: keep the retention
// above the longest redelivery window. inboxkafka.Config.Retention makes the
// consumer loop purge on its own every PurgeInterval (off by default).
// PROCESSING rows whose lease expired are reported as stuck by Store.Counts
// and by the gauges Inbox.RefreshMetrics sets.
//
// # Tracing
//
// The outbox writer injects the producer's trace context into each row's
// headers (W3C traceparent and tracestate), the relay passes them through to
// Kafka, and the consumer loop extracts them with Config.Propagator and runs
// every delivery in a span of Config.TracerProvider (both default to the
// OpenTelemetry globals) whose parent is the producer's span. The handler's
// ctx carries that span, so its database calls and outgoing requests join
// the trace. The span, kind consumer, named "process <topic>", has the
// messaging attributes messaging.system (kafka), messaging.operation.type
// (process), messaging.destination.name, messaging.destination.partition.id,
// messaging.kafka.offset, messaging.consumer.group.name and
// messaging.message.id, plus pgoutbox.inbox.consumer, .outcome, .attempts,
// .result_ref, .reason and, with Config.TraceBusinessKey, .business_key. A
// batch that is rolled back to be replayed one message at a time ends its
// spans with an error; each message then gets a span of its own. Only the
// OpenTelemetry API is used here: install an SDK in the application.
//
// # Metrics
//
// Registered on Config.Registerer (never the global registry), all labelled
// with the consumer (a constant label: consumers share a Registerer, and New
// refuses a second Inbox of the same consumer on one with the registration
// error):
//   - pgoutbox_inbox_messages_total{consumer,outcome}: deliveries by outcome.
//   - pgoutbox_inbox_processing_duration_seconds{consumer}: histogram of the
//     time to claim, handle and commit one delivery.
//   - pgoutbox_inbox_attempts{consumer}: histogram of the attempts a message
//     needed until it completed or was dead-lettered.
//   - pgoutbox_inbox_retries_total{consumer}: handler failures recorded for a
//     retry.
//   - pgoutbox_inbox_dead_lettered_total{consumer,reason}: dead-lettered
//     messages by reason (max-attempts, permanent, conflict, missing-headers,
//     invalid-key, repeated-header).
//   - pgoutbox_inbox_in_flight{consumer}: deliveries being handled now.
//   - pgoutbox_inbox_stuck_processing{consumer}: PROCESSING rows with an
//     expired lease, as of the last RefreshMetrics call (the consumer loop calls it
//     every inboxkafka.Config.MetricsInterval).
//   - pgoutbox_inbox_unfinished{consumer,status}: rows per status other than
//     COMPLETED, as of the last RefreshMetrics call.
//   - pgoutbox_inbox_oldest_unfinished_seconds{consumer}: age of the oldest
//     RECEIVED, PROCESSING or FAILED_RETRYABLE row (0 when none).
//   - pgoutbox_inbox_message_age_seconds{consumer}: histogram of the age of a
//     message (from its Kafka record timestamp) when handling started.
//   - pgoutbox_inbox_fetch_errors_total{consumer}: Kafka fetch errors the
//     client reported to the consumer loop (it retries retriable broker
//     errors by itself, uncounted); the loop logs them (at Warn at most
//     every 10s), backs off and polls again.
//   - pgoutbox_inbox_queue_bytes{consumer}: bytes of fetched records the
//     consumer loop holds, queued or being handled (at most
//     inboxkafka.Config.MaxQueueBytes).
//
// RefreshMetrics reads only the rows that are not COMPLETED, through the partial index
// of migration 003, so the periodic call stays cheap on an inbox of millions
// of rows; Store.Counts (command "inbox status") counts every row exactly.
//
// # Cost
//
// On a *pgxpool.Pool, *pgxpool.Conn or *pgx.Conn the claim travels with
// BEGIN in one round trip (pgx's Batch.BeginTx): one message in its own
// transaction takes BEGIN with the claim, the handler's statements and
// COMMIT, plus an UPDATE when the handler returns a result reference. A dedup
// table written by hand takes a round trip more. The benchmark against that
// baseline is test/bench/inboxbench (make bench-inbox); its figures are in
// docs/benchmarks.md.
//
// # Logs
//
// Config.Logger receives structured records with consumer, message_id,
// business_key, outcome, the status transition (from, to; "NEW" for a new
// row), attempt and, for failures, reason and err.
//
// Message IDs and business keys (often personal data) are logged shortened
// to a prefix, their length and a short hash; Config.LogFullKeys logs them
// whole. A handler error's text, in the logs, in last_error and in the
// dlq-detail header, is rendered by Config.ErrorRedactor when set (to scrub
// tokens or response bodies an error quotes) and bounded to MaxErrorText
// bytes.
package inbox
