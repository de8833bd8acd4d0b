//go:build nodev

package relaycli

import "github.com/urfave/cli/v2"

// devCommands is empty in a build with -tags nodev: the production binary
// then carries neither `relay dev` nor the embedded Kafka broker and the
// Postgres launcher it needs.
func devCommands(*scrubber) []*cli.Command { return nil }
