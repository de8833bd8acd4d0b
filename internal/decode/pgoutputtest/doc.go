// Package pgoutputtest encodes pgoutput (proto_version 1) messages, the
// replication stream a decoder under test reads.
package pgoutputtest
