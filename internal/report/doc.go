// Package report renders what the relay's administrative commands print
// and export, apart from their flags: `relay status`'s table and its
// fleet form (one section per source, JSON under "sources"), `relay
// verify`'s report (text, indented JSON, or one line per source of a
// fleet) and its one-line verdict, `relay recover`'s result, and the push
// of verify's gauges to a Prometheus Pushgateway.
//
// internal/relaycli parses the flags, calls the relay and decides the exit
// code; this package only writes. It reads the relay's result types
// (pkg/relay/relaytype) and imports no stage of the engine.
package report
