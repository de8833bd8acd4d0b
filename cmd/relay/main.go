package main

import (
	"context"
	"fmt"
	"os"

	"github.com/pgoutbox/pgoutbox/internal/relaycli"
	"github.com/pgoutbox/pgoutbox/internal/stopsignal"
)

func main() {
	// The first SIGINT/SIGTERM cancels ctx: `relay run` flushes, confirms
	// and exits 0. A second Ctrl-C exits at once (see stopsignal.Notify).
	ctx, stop := stopsignal.Notify(context.Background(), os.Stderr, func() {
		fmt.Fprintln(os.Stderr, "relay: second signal: exiting without a graceful stop")
		os.Exit(relaycli.ExitFailure)
	})
	code := relaycli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
