// Package devdemo is `relay dev`: the whole pipeline on one machine, for a
// first look and as the CI smoke test. It starts a throwaway Postgres
// (internal/pgserver) unless given a server, an embedded Kafka-protocol
// broker (kfake), the relay, a producer placing orders through pkg/outbox
// and an inbox consumer shipping them through pkg/inbox, prints a status
// line per second and a summary, and removes what it started.
//
// Only the relay CLI's dev command imports it; a build with -tags nodev
// leaves that command, and with it this package, kfake and the Postgres
// launcher, out of the binary.
package devdemo
