// Package sql holds the canonical DDL of pgoutbox as numbered migration files,
// embedded so the Go code (outbox.Migrate, inbox.Migrate, the CLIs) and a DBA
// running `psql -f` apply exactly the same statements.
//
// # Layout
//
// Each component has its own folder of migrations named NNN_description.up.sql,
// applied in numeric order:
//
//	sql/outbox/001_create_outbox.up.sql
//	sql/outbox/003_id_default_uuidv7.up.sql
//
// Every statement is idempotent (IF NOT EXISTS, CREATE OR REPLACE), so a file
// applied by hand and later again by the Go API does no harm. The files name
// the default table (public.outbox); the Go API substitutes a configured
// table name, and puts pgoutbox_uuidv7() in that table's schema. The
// numbering may have gaps.
//
// # Outbox column contract
//
// Any producer, in any language, publishes an event by inserting one row in
// its own transaction; the relay turns it into one Kafka record:
//
//	id             uuid   default pgoutbox_uuidv7()  message-id header; stable across re-publishes
//	aggregate_type text   required                   topic outbox.{aggregate_type} (the relay's template)
//	aggregate_id   text   required                   record key: order per aggregate; aggregate-id header
//	event_type     text   required                   event-type header
//	business_key   text   required                   business-key header; consumers deduplicate on it
//	payload        jsonb  required                   record value (json, text or bytea also accepted)
//	headers        jsonb  optional                   object of extra string headers (cannot override the above)
//	topic          text   optional                   explicit topic, overrides the template
//	created_at     timestamptz default now()         used by pruning
//
// For example, from psql or a trigger:
//
//	INSERT INTO outbox (aggregate_type, aggregate_id, event_type, business_key, payload)
//	VALUES ('order', '42', 'order.placed', 'order-42-placed', '{"total":1200}');
package sql
