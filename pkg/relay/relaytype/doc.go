// Package relaytype declares the types that package relay and the relay's
// engine (internal/...) both name: the sentinel errors and the error types
// Run, Setup, Recover and CheckPrerequisites return; the results of Status,
// Recover and Verify; the SharedBuffer interfaces the queue implements.
// Each is declared once, here, low in the import graph, as river declares
// its shared types in rivertype: package relay names them as aliases, so
// errors.As finds what the engine returns.
//
// The configuration is not here: relay.Config and the policies are
// declared in package relay (the SASL configuration in the leaf package
// kafkasasl), and no stage sees them; relay.New derives the small config
// each stage declares.
//
// Most programs use package relay and never import this one; go doc shows
// the fields here. Run, Setup and the other functions named in the
// documentation are package relay's, as are the table formats
// (relay.TableFormatPgoutbox...) and the Reason* constants.
package relaytype
