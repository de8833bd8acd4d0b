package kafkaflags_test

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/kafkaflags"
	"github.com/pgoutbox/pgoutbox/pkg/kafkasasl"
)

// read parses args as the Kafka flags of a command and reads them.
func read(t *testing.T, args ...string) (kafkaflags.Security, error) {
	t.Helper()
	env := func(flag string) string {
		return "KAFKAFLAGS_TEST_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
	}
	var sec kafkaflags.Security
	var readErr error
	app := &cli.App{Name: "t", Flags: kafkaflags.Flags(env, "Kafka"), Action: func(c *cli.Context) error {
		sec, readErr = kafkaflags.Read(c, env)
		return nil
	}}
	if err := app.Run(append([]string{"t"}, args...)); err != nil {
		t.Fatal(err)
	}
	return sec, readErr
}

// aws-msk-iam takes static keys (a username and a password) or neither
// (the AWS SDK's default chain); a password alone is a usage error, and
// SASL still needs TLS.
func TestAWSMSKIAMFlags(t *testing.T) {
	sec, err := read(t, "--kafka-tls", "--kafka-sasl-mechanism", "aws-msk-iam")
	if err != nil || sec.SASL == nil || sec.SASL.Mechanism != kafkasasl.AWSMSKIAM || sec.SASL.Username != "" {
		t.Fatalf("default chain: %+v, %v", sec.SASL, err)
	}
	sec, err = read(t, "--kafka-tls", "--kafka-sasl-mechanism", "AWS_MSK_IAM", "--kafka-sasl-username", "AKIAEXAMPLE", "--kafka-sasl-password", "s")
	if err != nil || sec.SASL.Username != "AKIAEXAMPLE" || sec.SASL.Password != "s" {
		t.Fatalf("static keys: %+v, %v", sec.SASL, err)
	}
	if _, err = read(t, "--kafka-tls", "--kafka-sasl-mechanism", "aws-msk-iam", "--kafka-sasl-password", "s"); !cliutil.IsUsage(err) || !strings.Contains(err.Error(), "--kafka-sasl-username") || strings.Contains(err.Error(), "s\"") {
		t.Fatalf("a password alone: %v, want a usage error naming --kafka-sasl-username", err)
	}
	if _, err = read(t, "--kafka-sasl-mechanism", "aws-msk-iam"); !cliutil.IsUsage(err) || !strings.Contains(err.Error(), "--kafka-tls") {
		t.Fatalf("without TLS: %v, want a usage error naming --kafka-tls", err)
	}
}
