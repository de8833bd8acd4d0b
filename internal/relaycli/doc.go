// Package relaycli is the command line of the relay: `relay run`, `setup`,
// `status`, `teardown`, `recover` and `backfill`, and `relay dev`, whose
// demo lives in internal/devdemo (a build with -tags nodev leaves it out).
// cmd/relay only wires signals (internal/stopsignal) and the process exit
// code; the command line lives here, so tests run the CLI with an argument
// list and read what it prints. This package holds the flags, the wiring
// of each command and its exit code; what the commands print and check
// apart from their flags lives in the packages it calls: internal/report
// (status's and verify's reports, the Pushgateway push),
// internal/preflight (the start-up checks), internal/otlptracing,
// internal/memlimit, and internal/fleet (the fleet of relay run --config).
//
// # Exit codes
//
//   - 0: success (for run: stopped by a signal after a graceful flush).
//   - 1: runtime failure: an unreachable database or broker, missing
//     privileges, a missing or lost slot (status), an engine error.
//   - 2: bad usage or configuration: unknown flag or command, an invalid flag
//     value, teardown without --yes.
//
// Failures print one line on stderr, "relay: <cause>". The database password
// never appears in that line, in logs or in --help.
package relaycli
