// Package tableformat holds the shape of each outbox table format: which
// column holds each field of an event, the column types the relay reads,
// and each format's default topic template. The format's name
// (relaytype.TableFormat, relaytype.TableFormatPgoutbox...) and the
// default templates are declared once in package relaytype, which
// relay.Config and the engine both name; this package maps each to its
// columns.
package tableformat
