// Package outbox writes outbox rows inside the caller's own database
// transaction, so a business change and the event announcing it commit or roll
// back together. The relay (package relay, command relay) then publishes every
// committed row to Kafka.
//
// # Writing
//
// Create a Writer once on the driver of your database handle (Pgx for pgx,
// SQL for database/sql) and call InsertTx (one message) or InsertManyTx (a
// batch) with the transaction that holds the business change; "Tx" means
// "in the caller's transaction", as in package inbox:
//
//	w, err := outbox.NewWriter(outbox.Pgx(pool), &outbox.Config{})
//	...
//	tx, err := pool.Begin(ctx)
//	...
//	_, err = tx.Exec(ctx, `UPDATE payment SET status = 'completed' WHERE id = $1`, id)
//	...
//	_, err = w.InsertTx(ctx, tx, outbox.Message{
//		AggregateType: "payment",
//		AggregateID:   id,
//		EventType:     "payment.completed",
//		BusinessKey:   requestID,
//		Payload:       []byte(`{"amount":1200}`),
//	})
//	...
//	err = tx.Commit(ctx)
//
// # Logical messages
//
// EmitTx writes the same message into the WAL as a transactional logical
// decoding message (pg_logical_emit_message with prefix "pgoutbox") instead
// of a table row: no table, no bloat, no pruning. The relay publishes it
// exactly like a row, in commit order with rows, and nothing when the
// transaction rolls back. The content is versioned JSON with the payload
// base64-encoded, so any payload bytes survive (the relay decodes it). A
// message exists only in the WAL, so it reaches Kafka only through a slot
// that existed when its transaction committed (run relay setup first).
//
// # Drivers: pgx, database/sql and SQL-only producers
//
// A Writer is generic over its driver's transaction type: NewWriter(Pgx(db),
// cfg) is a *Writer[pgx.Tx], NewWriter(SQL(db), cfg) a *Writer[*sql.Tx]
// whose operations take a *sql.Tx (from pgx's stdlib driver or lib/pq, and
// so the transactions of sqlx, GORM, ent and bun). Every operation is one
// implementation on both and writes the same rows; InsertManyTx sends COPY
// on pgx and multi-row INSERTs on database/sql. The Writer never uses the
// driver's handle (Pgx(nil) serves it); Migrate does. The inbox has the same
// drivers (inbox.Pgx, inbox.SQL) over the same code.
//
// Producers in other languages, or triggers, insert with plain SQL: id
// defaults to pgoutbox_uuidv7() (migration 003), a time-ordered UUIDv7
// generated in SQL; gen_random_uuid() is the alternative default. The
// column contract is in docs/producers.md.
//
// # Message IDs
//
// A message without an ID gets a UUIDv7: time-ordered, so the primary-key index
// stays append-only. The ID is the record's message-id header in Kafka and is
// stable across every re-publish, which is what consumers deduplicate on.
//
// # Trace context
//
// InsertTx, InsertManyTx and EmitTx record a "create" span per message
// (Config.TracerProvider, default the OpenTelemetry global; kind PRODUCER,
// a child of ctx's span, by OpenTelemetry's messaging conventions) and
// inject its context, the message's creation context, into the message's
// headers through Config.Propagator (default: the OpenTelemetry global
// propagator; install propagation.TraceContext{} for W3C traceparent and
// tracestate), unless the message sets traceparent itself: then it keeps
// it and gets no span. Without an SDK the span records nothing and the
// headers carry ctx's own context. The relay publishes them as Kafka
// headers byte for byte and the inbox consumer continues the trace.
//
// # Validation
//
// AggregateType, AggregateID, EventType and BusinessKey are required, and the
// payload must be valid JSON unless Config.RawPayload says the payload column
// is text or bytea. The business key follows the key rules shared with the
// relay and the inbox: non-empty, valid UTF-8, no NUL byte, at most 1024
// bytes (a row inserted with plain SQL that breaks them is dead-lettered by
// the relay with reason invalid-key). The aggregate ID must be valid UTF-8
// without NUL. Errors wrap ErrInvalidMessage; use errors.Is.
//
// # Schema
//
// Migrate creates the outbox table on a driver's database (the same
// statements as sql/outbox/*.up.sql, which a DBA may apply with psql -f
// instead): Migrate(ctx, Pgx(pool), "") or Migrate(ctx, SQL(db), ""). Note that
// a jsonb payload is stored normalised (whitespace and key order as Postgres
// prints jsonb); use a json, text or bytea column to keep the input bytes.
package outbox
