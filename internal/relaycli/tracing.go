package relaycli

import (
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/otlptracing"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relayhook"
)

// startTracing, with --tracing, returns the OpenTelemetry tracer as the
// relays' hooks and the function that flushes and stops its exporter at
// exit (otlptracing.Start); an OTEL_* setting it cannot use is bad usage.
// Without --tracing it does nothing.
func startTracing(c *cli.Context, logger *slog.Logger) (hooks []relayhook.Hook, stop func(), err error) {
	if !c.Bool(flagTracing) {
		return nil, func() {}, nil
	}
	if hooks, stop, err = otlptracing.Start(c.Context, logger, "--"+flagTracing); err != nil {
		return nil, nil, usagef("%v", err)
	}
	return hooks, stop, nil
}
