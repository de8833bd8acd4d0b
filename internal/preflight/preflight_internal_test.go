package preflight

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// With TLS on, a handshake that never completes (the chart's default TLS
// against a plaintext kafka-0.kafka:9092) gets a hint naming --kafka-tls;
// other errors, and the same errors without TLS, get none.
func TestTLSHintOnAPlaintextPort(t *testing.T) {
	withTLS, plain := &relay.Config{Kafka: relay.KafkaConfig{TLS: &tls.Config{}}}, &relay.Config{}
	for _, tc := range []struct {
		cfg  *relay.Config
		err  error
		hint bool
	}{
		{withTLS, errors.Join(errors.New("ping"), context.DeadlineExceeded), true},
		{withTLS, errors.Join(errors.New("ping"), io.EOF), true},
		{withTLS, tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, true},
		{withTLS, errors.New("SASL authentication failed"), false},
		{plain, errors.Join(errors.New("ping"), context.DeadlineExceeded), false},
	} {
		if got := tlsHint(tc.cfg, tc.err); (got != "") != tc.hint || tc.hint && !strings.Contains(got, "--kafka-tls") {
			t.Errorf("TLS %v, %v: hint %q, want one: %v", tc.cfg.Kafka.TLS != nil, tc.err, got, tc.hint)
		}
	}
}
