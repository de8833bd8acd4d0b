// Command inbox administers the pgoutbox inbox table: migrate, status,
// purge, list, revive, and tail (consume topics through the inbox and print
// each outcome). Run "inbox --help" for the commands; every flag has an
// INBOX_* environment variable.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/pgoutbox/pgoutbox/internal/inboxcli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal stops gracefully; restoring the default
		// handlers lets a second one stop at once.
		<-ctx.Done()
		stop()
	}()
	code := inboxcli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
