// Package stopsignal turns the signals that stop `relay run` (SIGINT,
// SIGTERM) into a cancelled context: the first stops gracefully (the relay
// flushes, confirms and exits 0), a second Ctrl-C forces the exit, and a
// repeated SIGTERM, as GNU timeout and supervisors send it, is the same
// graceful stop. cmd/relay wires it around the command line.
package stopsignal
