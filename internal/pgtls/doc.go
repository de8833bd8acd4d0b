// Package pgtls judges how a Postgres connection string protects the
// traffic it carries: whether every host it may reach is either local (a
// Unix socket or a loopback address) or reached over TLS with a verified
// server certificate (sslmode=verify-ca or verify-full).
//
// The relay's replication stream carries every outbox payload, so the relay
// warns about (or, with --require-tls, refuses) anything weaker; pgx's
// default, sslmode=prefer, encrypts without verifying the server and falls
// back to plaintext.
package pgtls
