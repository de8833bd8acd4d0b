// Package relayconfig holds the engine's copy of relay.Config (the same
// fields, documented in package relay, which converts its Config to this
// one), its defaults and validation, and the topic template.
package relayconfig
