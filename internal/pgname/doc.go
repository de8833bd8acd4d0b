// Package pgname parses and quotes the qualified table names that users pass
// in configuration (for example "public.outbox" or "billing.events").
package pgname
