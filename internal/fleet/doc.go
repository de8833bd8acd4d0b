// Package fleet is relay run --config: one relay per source of a fleet
// file, in one process, each with its own slot, leader election and
// metrics (label source). It holds the file (Load: its keys are relay
// run's per-source flag names, which the command line parses through a
// Parser), the process that runs the sources (Run: start, stop, reload on
// SIGHUP or a settled change of the file or its secret files, /status,
// /readyz and the metrics), the spread of the sources over the replicas
// through a Kafka consumer group, and the topics every source's relay
// writes, reserved for all of them.
//
// docs/fleet.md is the user's guide, docs/security.md says what the fleet
// trusts.
//
// # Only relays take the sources
//
// With spread:, the group's assignment of the topic pgoutbox.fleet.GROUP
// is the assignment of the sources, so any Kafka client that joins the
// group could take sources. Kafka ACLs are the control. Behind them, with
// spread: secret-file:, the members and the leader prove the fleet secret
// with HMACs (proof.go): a member without proof is given no source, and an
// assignment without proof is refused. Every replica describes the group
// (held.go) and fails /readyz when no relay of the fleet has held a source
// for three session timeouts.
//
// # Errors
//
// An error in the file is a cliutil.UsageError (exit 2); an error of the
// running process (an address in use, a group that cannot be joined) is
// any other error.
package fleet
