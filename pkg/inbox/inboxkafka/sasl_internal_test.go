package inboxkafka

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/kafkaclient"
	"github.com/pgoutbox/pgoutbox/pkg/kafkasasl"
	_ "github.com/pgoutbox/pgoutbox/pkg/kafkasasl/awsmsk"
)

// mechanismOf returns the one SASL mechanism of cl's options.
func mechanismOf(t *testing.T, cl *kgo.Client) sasl.Mechanism {
	t.Helper()
	ms, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism)
	if len(ms) != 1 {
		t.Fatalf("client has %d SASL mechanisms, want 1", len(ms))
	}
	return ms[0]
}

// The consumer's client and the dead-letter writer's authenticate with the
// relay's mechanisms from Config.SASL: OAUTHBEARER with the token
// read from its file, AWS_MSK_IAM signing with the given keys (kfake speaks
// neither, so the first message of each is checked). The consumer reads
// read_committed unless told otherwise.
func TestConsumerClientsCarrySASLAndIsolation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("eyJ.token.sig\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	for _, tc := range []struct {
		sasl  *kafkasasl.Config
		name  string
		first string // in the mechanism's first message
	}{
		{&kafkasasl.Config{Mechanism: kafkasasl.OAuthBearer, TokenFile: file}, "OAUTHBEARER", "auth=Bearer eyJ.token.sig"},
		{&kafkasasl.Config{Mechanism: kafkasasl.AWSMSKIAM, Username: "AKIAEXAMPLE", Password: secret}, "AWS_MSK_IAM", "AKIAEXAMPLE"},
	} {
		c := &Consumer[struct{}]{cfg: Config[struct{}]{Brokers: []string{"127.0.0.1:1"}, GroupID: "g", Topics: []string{"t"},
			SASL: tc.sasl, Isolation: ReadCommitted, MaxWait: time.Second}, log: slog.New(slog.DiscardHandler)}
		if err := kafkaclient.CheckSASL(tc.sasl); err != nil {
			t.Fatal(err)
		}
		cons, err := kgo.NewClient(c.clientOpts(newGroup(c, context.Background(), nil, nil))...)
		if err != nil {
			t.Fatal(err)
		}
		// The dead-letter writer (package inbox) builds its client with
		// the same kafkaclient.Opts.
		dlq, err := kgo.NewClient(kafkaclient.Opts([]string{"127.0.0.1:1"}, nil, tc.sasl)...)
		if err != nil {
			t.Fatal(err)
		}
		for side, cl := range map[string]*kgo.Client{"consumer": cons, "dead-letter writer": dlq} {
			m := mechanismOf(t, cl)
			_, msg, err := m.Authenticate(context.Background(), "b-1.cluster.kafka.eu-west-1.amazonaws.com:9098")
			if m.Name() != tc.name || err != nil || !strings.Contains(string(msg), tc.first) {
				t.Errorf("%s: mechanism %s, first message %q, %v; want %s with %q", side, m.Name(), msg, err, tc.name, tc.first)
			}
			if strings.Contains(string(msg), secret) {
				t.Errorf("%s: the secret key is sent", side)
			}
		}
		if got := cons.OptValue(kgo.FetchIsolationLevel); got != int8(1) { // kgo.ReadCommitted
			t.Errorf("consumer isolation %v, want 1 (read_committed)", got)
		}
		cons.Close()
		dlq.Close()
	}

	c := &Consumer[struct{}]{cfg: Config[struct{}]{Brokers: []string{"127.0.0.1:1"}, GroupID: "g", Topics: []string{"t"},
		Isolation: ReadUncommitted, MaxWait: time.Second}, log: slog.New(slog.DiscardHandler)}
	cl, err := kgo.NewClient(c.clientOpts(newGroup(c, context.Background(), nil, nil))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got := cl.OptValue(kgo.FetchIsolationLevel); got != int8(0) {
		t.Errorf("ReadUncommitted: isolation %v, want 0", got)
	}
	if ms, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism); len(ms) != 0 {
		t.Errorf("no SASL configured, client has %d mechanisms", len(ms))
	}

	// A mechanism without what it needs is refused before any connection.
	for _, s := range []*kafkasasl.Config{{Mechanism: kafkasasl.OAuthBearer}, {Mechanism: "GSSAPI"}, {Mechanism: kafkasasl.Plain}} {
		if err := kafkaclient.CheckSASL(s); err == nil {
			t.Errorf("SASL %+v accepted", s)
		}
	}
}
