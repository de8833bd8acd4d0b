package stopsignal

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Notify returns a context that the first SIGINT or SIGTERM cancels:
// relay run then flushes, confirms and exits 0. A later SIGINT (a second
// Ctrl-C), or any signal after a first SIGINT, calls force (exit at once).
// A repeated SIGTERM does not: GNU timeout, and supervisors like it,
// signal the process and then its process group, so one stop arrives as
// two SIGTERMs; a supervisor escalates with SIGKILL. The first signal is
// announced on w. stop releases the signals and waits for the watcher.
func Notify(parent context.Context, w io.Writer, force func()) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var first os.Signal
		for {
			select {
			case <-done:
				return
			case sig := <-ch:
				switch {
				case first == nil:
					first = sig
					fmt.Fprintf(w, "relay: %s: stopping gracefully (a second Ctrl-C exits at once)\n", sig)
					cancel()
				case sig == syscall.SIGTERM && first == syscall.SIGTERM:
					// The same stop, delivered to the process and its group.
					fmt.Fprintf(w, "relay: %s again: still stopping gracefully\n", sig)
				default:
					force()
					return
				}
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			wg.Wait()
			cancel()
		})
	}
}
