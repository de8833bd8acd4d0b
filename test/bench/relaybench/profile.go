package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"

	"github.com/pgoutbox/pgoutbox/internal/relaycli"
)

// Environment of a relaybench process started as the relay (see
// runAsRelay): the relay profiled is this binary, which runs the same code
// as cmd/relay.
const (
	envAsRelay    = "RELAYBENCH_AS_RELAY"
	envCPUProfile = "RELAYBENCH_CPUPROFILE"
	envMemProfile = "RELAYBENCH_MEMPROFILE"
)

// runAsRelay runs `relay` with args (as cmd/relay does) when this process
// was started as the relay, writing the CPU and heap profiles named in its
// environment, and reports whether it was; code is the relay's exit code.
func runAsRelay() (code int, ok bool) {
	if os.Getenv(envAsRelay) == "" {
		return 0, false
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if path := os.Getenv(envCPUProfile); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "relaybench: cpu profile: %v\n", err)
			return 1, true
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "relaybench: cpu profile: %v\n", err)
			return 1, true
		}
		defer pprof.StopCPUProfile()
	}
	if path := os.Getenv(envMemProfile); path != "" {
		runtime.MemProfileRate = 64 << 10
		defer func() {
			f, err := os.Create(path)
			if err == nil {
				// allocs: every allocation since the start (-sample_index
				// alloc_space / alloc_objects), and what is live at the end.
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "relaybench: memory profile: %v\n", err)
			}
		}()
	}
	if path := os.Getenv(envTrace); path != "" {
		var write func() error
		ctx, write = installTrace(ctx, path)
		defer func() {
			if err := write(); err != nil {
				fmt.Fprintf(os.Stderr, "relaybench: trace: %v\n", err)
			}
		}()
	}
	return relaycli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr), true
}

// profiledRelay returns the relay binary to run when a profile or a trace
// is asked for (this binary, started as the relay) and sets the
// environment that makes it one.
func profiledRelay(cpu, mem, trace string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	for k, v := range map[string]string{envAsRelay: "1", envCPUProfile: cpu, envMemProfile: mem, envTrace: trace} {
		if err := os.Setenv(k, v); err != nil {
			return "", err
		}
	}
	return self, nil
}
