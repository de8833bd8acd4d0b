// Package pgoutbox is the root of the pgoutbox module: a transactional
// outbox for Postgres, a relay that publishes it to Kafka through logical
// replication, and a consumer-side inbox that makes redeliveries harmless.
//
// Applications import the packages under pkg/:
//
//   - pkg/outbox writes an outbox row (or a logical message) in the
//     caller's transaction;
//   - pkg/relay is the relay engine behind the relay command;
//   - pkg/inbox deduplicates Kafka deliveries inside the consumer's
//     transaction.
//
// This package holds only Migrations, the SQL files of the sql/ folder,
// which outbox.Migrate and inbox.Migrate apply; a DBA may apply the same
// files with psql -f instead. The files stay in sql/ for them, and Go can
// embed a folder only from a package at or above it: hence a package here,
// not one named sql, which would collide with database/sql.
package pgoutbox
