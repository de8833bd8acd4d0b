package relay

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

// The source of the AWS chain that gave AWS_MSK_IAM its credentials is
// logged once, however often the client authenticates: a fall back to the
// node's role (IMDS) would otherwise go unseen.
func TestAWSMSKIAMLogsItsSourceOnce(t *testing.T) {
	for _, k := range []string{"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/credentials")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAFROMENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRET-never-logged")
	var logs strings.Builder
	m, err := (&SASL{Mechanism: SASLAWSMSKIAM}).mechanism(slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, _, err := m.Authenticate(context.Background(), "b-1.cluster.kafka.eu-west-1.amazonaws.com:9098"); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "source=EnvConfigCredentials"); n != 1 || strings.Contains(logs.String(), "SECRET") {
		t.Errorf("logged the source %d times, want once, without the secret:\n%s", n, logs.String())
	}
}
