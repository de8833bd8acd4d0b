// Package memlimit holds the soft memory limits the relay's commands give
// the Go runtime (debug.SetMemoryLimit) and how they are set: `relay run`'s
// from its buffer, a fleet's from its shared buffer and its number of
// sources, `relay verify`'s from its sorts' entries. GOMEMLIMIT, when set,
// overrides them all, and a limit someone else set is never replaced.
package memlimit
