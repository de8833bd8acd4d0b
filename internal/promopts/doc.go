// Package promopts builds the Prometheus collectors of the relay
// (internal/relaymetrics) and of the inbox (pkg/inbox) under one namespace
// and subsystem, unregistered: each caller registers them on the
// Registerer its user gives it, never on the global registry.
package promopts
