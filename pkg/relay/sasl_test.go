package relay_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// The OAUTHBEARER token is read from its file at every authentication, so
// a token refreshed in the file is the one sent next (kfake does not speak
// OAUTHBEARER; the mechanism's first message is checked instead).
func TestOAuthBearerRereadsTheToken(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "token")
	first := func(tok string) string {
		t.Helper()
		if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := (&relay.SASL{Mechanism: "OAUTHBEARER", TokenFile: file}).KafkaMechanism()
		if err != nil {
			t.Fatal(err)
		}
		_, msg, err := m.Authenticate(context.Background(), "broker:9092")
		if err != nil {
			return "error: " + err.Error()
		}
		return string(msg)
	}
	if got := first("token-1"); !strings.Contains(got, "auth=Bearer token-1\x01") {
		t.Fatalf("first message %q, want token-1", got)
	}
	if got := first("token-2"); !strings.Contains(got, "auth=Bearer token-2\x01") {
		t.Fatalf("first message after the file changed %q, want token-2", got)
	}
	if got := first(""); !strings.Contains(got, "empty") {
		t.Fatalf("empty token file: %q, want an error", got)
	}
}

// A mechanism without what it needs does not build.
func TestSASLMechanismRefusesMissingCredentials(t *testing.T) {
	t.Parallel()
	for _, s := range []*relay.SASL{{Mechanism: "GSSAPI"}, {Mechanism: "PLAIN"}, {Mechanism: "OAUTHBEARER"}} {
		if _, err := s.KafkaMechanism(); err == nil {
			t.Errorf("SASL %+v: no error", s)
		}
	}
}

// A client of KafkaClientOpts whose SASL configuration does not build
// (PLAIN without a user name) never reaches a broker without SASL: every
// dial fails with the SASL error. It used to leave SASL out and connect.
func TestClientOptsFailClosedOnBadSASL(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t)
	cl, err := kgo.NewClient(relay.KafkaClientOpts(&relay.Config{Brokers: k.Brokers, SASL: &relay.SASL{Mechanism: "PLAIN"}})...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = cl.Ping(ctx)
	if err == nil || !strings.Contains(err.Error(), "SASL PLAIN needs a username") {
		t.Fatalf("Ping: %v, want the SASL error", err)
	}
}
