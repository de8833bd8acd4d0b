// Package relaytype declares the types that package relay and the relay's
// engine (internal/...) share: the Config and its SASL, policies and
// defaults; the sentinel errors and the error types Run, Setup, Recover and
// CheckPrerequisites return; the results of Status, Recover and Verify.
// Each is declared once, here, low in the import graph, as river declares
// its shared types in rivertype: package relay names them as aliases, so
// relay.Config and relaytype.Config are the same type, and errors.As finds
// what the engine returns.
//
// Most programs use package relay and never import this one; go doc shows
// the fields here. Run, Setup and the other functions named in the
// documentation are package relay's, as are the table formats
// (relay.TableFormatPgoutbox...) and the Reason* constants.
package relaytype
