// Package tableformat holds the outbox table formats (TableFormat): which
// column holds each field of an event, the column types the relay reads,
// and each format's default topic template. Config and the decoder share
// it; package relay exposes the formats under their own names.
package tableformat
