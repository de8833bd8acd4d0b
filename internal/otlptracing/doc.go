// Package otlptracing starts the OpenTelemetry tracing of `relay run
// --tracing`: the SDK's tracer provider with an OTLP/HTTP (protobuf)
// exporter, configured by the standard OTEL_* variables, handed to the
// relay as the hooks of pkg/relay/relayotel, and the function that
// flushes the last spans at exit.
package otlptracing
