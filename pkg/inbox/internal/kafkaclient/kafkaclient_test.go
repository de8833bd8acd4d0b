package kafkaclient

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/pgoutbox/pgoutbox/pkg/kafkasasl"
)

// Opts names the inbox's client ID before the caller's options, so a
// caller's kgo.ClientID wins, and carries the SASL mechanism it is given.
func TestOpts(t *testing.T) {
	cl, err := kgo.NewClient(Opts([]string{"127.0.0.1:1"}, nil, &kafkasasl.Config{Mechanism: kafkasasl.Plain, Username: "u", Password: "p"})...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if id, _ := cl.OptValue(kgo.ClientID).(string); id != clientID {
		t.Errorf("client ID %q, want %q", id, clientID)
	}
	if ms, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism); len(ms) != 1 || ms[0].Name() != "PLAIN" {
		t.Errorf("SASL mechanisms %v, want PLAIN", ms)
	}
	own, err := kgo.NewClient(Opts([]string{"127.0.0.1:1"}, nil, nil, kgo.ClientID("mine"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if id, _ := own.OptValue(kgo.ClientID).(string); id != "mine" {
		t.Errorf("client ID %q, want the caller's", id)
	}
	if ms, _ := own.OptValue(kgo.SASL).([]sasl.Mechanism); len(ms) != 0 {
		t.Errorf("SASL mechanisms %v without SASL", ms)
	}
}

// CheckSASL refuses a mechanism it does not know or one without its
// credentials, and its error carries no credential.
func TestCheckSASL(t *testing.T) {
	if err := CheckSASL(nil); err != nil {
		t.Errorf("nil: %v", err)
	}
	if err := CheckSASL(&kafkasasl.Config{Mechanism: kafkasasl.SCRAMSHA512, Username: "u", Password: "p"}); err != nil {
		t.Errorf("SCRAM: %v", err)
	}
	for _, s := range []*kafkasasl.Config{
		{Mechanism: "GSSAPI", Username: "u", Password: "s3cret-pass"},
		{Mechanism: kafkasasl.Plain, Password: "s3cret-pass"},
		{Mechanism: kafkasasl.OAuthBearer},
	} {
		err := CheckSASL(s)
		if err == nil {
			t.Errorf("%+v: no error", s.Mechanism)
			continue
		}
		if strings.Contains(err.Error(), "s3cret-pass") {
			t.Errorf("%s: error carries the password: %v", s.Mechanism, err)
		}
	}
}
