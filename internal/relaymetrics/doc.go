// Package relaymetrics defines the relay's Prometheus metrics (listed in
// package relay's documentation) and registers them on the Registerer a
// Config names, never on the global registry.
package relaymetrics
