package kafkasasl_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/pkg/kafkasasl"
)

// The OAUTHBEARER token is read from its file at every authentication, so
// a token refreshed in the file is the one sent next (the mechanism's
// first message is checked).
func TestOAuthBearerRereadsTheToken(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "token")
	first := func(tok string) string {
		t.Helper()
		if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := (&kafkasasl.Config{Mechanism: "OAUTHBEARER", TokenFile: file}).KafkaMechanism()
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

// A mechanism without what it needs does not build, and the error never
// carries the password.
func TestMechanismRefusesMissingCredentials(t *testing.T) {
	t.Parallel()
	for _, c := range []*kafkasasl.Config{
		{Mechanism: "GSSAPI", Username: "u", Password: "s3cret-pass"},
		{Mechanism: "PLAIN", Password: "s3cret-pass"},
		{Mechanism: "OAUTHBEARER"},
		{Mechanism: "AWS_MSK_IAM", Username: "AKIA"},
		{Mechanism: "AWS_MSK_IAM", Password: "s3cret-pass"},
	} {
		_, err := c.KafkaMechanism()
		if err == nil {
			t.Errorf("SASL %s: no error", c.Mechanism)
			continue
		}
		if strings.Contains(err.Error(), "s3cret-pass") {
			t.Errorf("SASL %s: error carries the password: %v", c.Mechanism, err)
		}
	}
}

// Every mechanism but AWS_MSK_IAM builds here; AWS_MSK_IAM needs package
// awsmsk, which this test binary does not link, and says so.
func TestMechanismsBuild(t *testing.T) {
	t.Parallel()
	for _, name := range []string{kafkasasl.Plain, kafkasasl.SCRAMSHA256, strings.ToLower(kafkasasl.SCRAMSHA512)} {
		m, err := (&kafkasasl.Config{Mechanism: name, Username: "u", Password: "p"}).KafkaMechanism()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.EqualFold(m.Name(), name) {
			t.Errorf("%s built %s", name, m.Name())
		}
	}
	_, err := (&kafkasasl.Config{Mechanism: kafkasasl.AWSMSKIAM, Username: "AKIA", Password: "p"}).KafkaMechanism()
	if !errors.Is(err, kafkasasl.ErrNotLinked) {
		t.Fatalf("AWS_MSK_IAM without awsmsk: %v, want ErrNotLinked", err)
	}
}
