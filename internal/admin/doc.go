// Package admin implements the relay's administrative calls, which package
// relay exposes: Setup, Status, Teardown, CheckPrerequisites, Backfill and
// Recover.
package admin
