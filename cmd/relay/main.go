package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/pgoutbox/pgoutbox/internal/relaycli"
)

func main() {
	// The first SIGINT/SIGTERM cancels ctx: `relay run` flushes, confirms
	// and exits 0. A second one exits at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	hard := make(chan os.Signal, 2)
	signal.Notify(hard, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-hard
		<-hard
		fmt.Fprintln(os.Stderr, "relay: second signal: exiting without a graceful stop")
		os.Exit(relaycli.ExitFailure)
	}()
	code := relaycli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
