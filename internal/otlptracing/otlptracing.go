package otlptracing

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"

	"github.com/pgoutbox/pgoutbox/pkg/relay/relayhook"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relayotel"
)

// Start returns the OpenTelemetry tracer as the relays' hooks
// (relay.Config.Hooks): the SDK's tracer provider with an OTLP/HTTP exporter, both
// configured by the standard OTEL_* variables (the exporter's endpoint,
// headers and timeout; the sampler, OTEL_TRACES_SAMPLER, parent-based
// always-on by default; the resource, whose service.name defaults to
// pgoutbox-relay). It returns the function that flushes and stops the
// exporter at exit. An error (an OTEL_* variable asking for a protocol
// other than http/protobuf, an exporter that cannot be built) begins with
// flag, the command-line switch that asked for tracing.
func Start(ctx context.Context, logger *slog.Logger, flag string) (hooks []relayhook.Hook, stop func(), err error) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(v); p != "" {
			if p != "http/protobuf" {
				return nil, nil, fmt.Errorf("%s exports OTLP over HTTP with protobuf: %s=%q is not supported (http/protobuf is)", flag, v, p)
			}
			break
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: the OTLP exporter: %w", flag, err)
	}
	res := serviceResource()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	hooks = []relayhook.Hook{relayotel.New(&relayotel.Config{TracerProvider: tp, Propagator: propagation.TraceContext{}})}
	logger.Info("tracing on: a send span per Kafka write, exported over OTLP/HTTP", "endpoint", endpoint())
	return hooks, func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			logger.Warn("tracing: the last spans were not exported", "error", err)
		}
	}, nil
}

// serviceResource is the SDK's default resource (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES), named pgoutbox-relay unless they name it.
func serviceResource() *resource.Resource {
	res := resource.Default()
	if v, ok := res.Set().Value(semconv.ServiceNameKey); ok && !strings.HasPrefix(v.AsString(), "unknown_service") {
		return res
	}
	if named, err := resource.Merge(res, resource.NewSchemaless(semconv.ServiceName("pgoutbox-relay"))); err == nil {
		return named
	}
	return res
}

// endpoint is where the exporter sends spans, as the OTEL variables say,
// without credentials or a query: for the log.
func endpoint() string {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if e := os.Getenv(v); e != "" {
			e, _, _ = strings.Cut(e, "?")
			if at := strings.LastIndex(e, "@"); at >= 0 {
				if scheme := strings.Index(e, "://"); scheme >= 0 && scheme < at {
					e = e[:scheme+3] + e[at+1:]
				}
			}
			return e
		}
	}
	return "http://localhost:4318 (the default)"
}
