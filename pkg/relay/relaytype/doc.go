// Package relaytype declares the types and values that package relay and
// the relay's engine (internal/...) both name: the sentinel errors and the
// error types Run, Setup, Recover and CheckPrerequisites return; the
// results of Status, Recover and Verify and their options; the
// SharedBuffer interfaces the queue implements; the table formats and
// their default topic templates; the reasons and bounds of dead letters;
// the name of the state table. Each is declared once, here, low in the
// import graph, and package relay's functions name them from here, as
// river's API names rivertype.JobRow: relay.Status returns a
// *relaytype.SlotStatus, and errors.As finds a *relaytype.GapError in what
// relay.Run returns. There is no second name for any of them.
//
// The configuration is not here: relay.Config, relay.KafkaConfig and the
// policies are declared in package relay (the SASL configuration in the
// leaf package kafkasasl), and no stage sees them; relay.New derives the
// small config each stage declares.
//
// Run, Setup and the other functions named in the documentation are
// package relay's.
package relaytype
