package relayotel_test

import (
	"context"
	"log"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relayhook"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relayotel"
)

// An embedded relay that exports a send span per Kafka write over
// OTLP/HTTP, configured by the standard OTEL_* variables (endpoint,
// sampler, service name).
func Example() {
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		log.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	defer func() { _ = tp.Shutdown(context.WithoutCancel(ctx)) }()

	r, err := relay.New(&relay.Config{
		DatabaseURL: os.Getenv("DATABASE_URL"),
		Kafka:       relay.KafkaConfig{Brokers: []string{"localhost:9092"}},
		Hooks:       []relayhook.Hook{relayotel.New(&relayotel.Config{TracerProvider: tp})},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
