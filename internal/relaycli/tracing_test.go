package relaycli_test

import (
	"testing"
)

// relay run --tracing exports OTLP over HTTP with protobuf only: an
// OTEL_EXPORTER_OTLP_*PROTOCOL asking for gRPC is a usage error (exit 2)
// naming the variable, before anything connects. Not parallel: the
// OTEL_* variables are the process's.
func TestTracingRefusesGRPC(t *testing.T) {
	base := []string{"run", "--tracing", "--database-url", "postgres://relay@127.0.0.1:1/db?sslmode=disable", "--brokers", "127.0.0.1:9092"}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Run(v, func(t *testing.T) {
			t.Setenv(v, "grpc")
			r := cli(t, base...)
			wantCode(t, r, 2)
			wantOneErrorLine(t, r.stderr, "--tracing", v, `"grpc"`, "http/protobuf")
		})
	}
}
