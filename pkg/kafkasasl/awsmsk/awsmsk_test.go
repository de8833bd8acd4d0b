package awsmsk_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pkg/kafkasasl"
	_ "github.com/pgoutbox/pgoutbox/pkg/kafkasasl/awsmsk"
)

// mskHost is an MSK broker: franz-go takes the signing region from it.
const mskHost = "b-1.cluster.kafka.eu-west-1.amazonaws.com:9098"

// isolateAWS clears every AWS source the test does not set: no
// environment keys, empty shared files, no web identity, no ECS, IMDS off.
func isolateAWS(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for _, k := range []string{
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
		"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS",
	} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// awsFirst is the signed first message of AWS_MSK_IAM for s, or the error
// text.
func awsFirst(t *testing.T, s *kafkasasl.Config) string {
	t.Helper()
	m, err := s.KafkaMechanism()
	if err != nil {
		return "mechanism error: " + err.Error()
	}
	_, msg, err := m.Authenticate(context.Background(), mskHost)
	if err != nil {
		return "error: " + err.Error()
	}
	return string(msg)
}

// AWS_MSK_IAM signs with the configured keys, which win over every other
// source; without them the environment's keys (the first source of the
// SDK's chain) are used; without any source the error names the chain
// and never carries a secret (kfake does not speak AWS_MSK_IAM: the
// signed first message is checked instead).
func TestAWSMSKIAMStaticAndEnvironment(t *testing.T) {
	const secret = "SECRET-never-shown"
	isolateAWS(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAFROMENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	msg := awsFirst(t, &kafkasasl.Config{Mechanism: "AWS_MSK_IAM", Username: "AKIAEXAMPLE", Password: secret})
	if !strings.Contains(msg, "AKIAEXAMPLE") || strings.Contains(msg, "AKIAFROMENV") || !strings.Contains(msg, "kafka-cluster:Connect") || strings.Contains(msg, secret) {
		t.Fatalf("static keys: first message %s: want the configured access key (not the environment's) and the action, never the secret", msg)
	}
	if msg = awsFirst(t, &kafkasasl.Config{Mechanism: "AWS_MSK_IAM"}); !strings.Contains(msg, "AKIAFROMENV") || strings.Contains(msg, secret) {
		t.Fatalf("from the environment: %s; want the environment's access key", msg)
	}
	if msg = awsFirst(t, &kafkasasl.Config{Mechanism: "AWS_MSK_IAM", Username: "AKIAEXAMPLE"}); !strings.HasPrefix(msg, "mechanism error:") {
		t.Fatalf("a username without a password: %s, want an error", msg)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	msg = awsFirst(t, &kafkasasl.Config{Mechanism: "AWS_MSK_IAM"})
	if !strings.HasPrefix(msg, "error:") || strings.Contains(msg, secret) || !strings.Contains(msg, "AWS_WEB_IDENTITY_TOKEN_FILE") || !strings.Contains(msg, "AWS_REGION") {
		t.Fatalf("without any source: %s, want an error naming the chain and the region, without the secret", msg)
	}
}

// A profile of the shared credentials file (AWS_PROFILE) is read.
func TestAWSMSKIAMProfile(t *testing.T) {
	isolateAWS(t)
	creds := os.Getenv("AWS_SHARED_CREDENTIALS_FILE")
	ini := "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = s0\n\n[relay]\naws_access_key_id = AKIAPROFILE\naws_secret_access_key = s1\naws_session_token = TOKENPROFILE\n"
	if err := os.WriteFile(creds, []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	if msg := awsFirst(t, &kafkasasl.Config{Mechanism: "AWS_MSK_IAM"}); !strings.Contains(msg, "AKIADEFAULT") {
		t.Fatalf("default profile: %s, want its access key", msg)
	}
	t.Setenv("AWS_PROFILE", "relay")
	if msg := awsFirst(t, &kafkasasl.Config{Mechanism: "AWS_MSK_IAM"}); !strings.Contains(msg, "AKIAPROFILE") || !strings.Contains(msg, "TOKENPROFILE") {
		t.Fatalf("AWS_PROFILE=relay: %s, want its access key and session token", msg)
	}
	t.Setenv("AWS_PROFILE", "missing")
	if msg := awsFirst(t, &kafkasasl.Config{Mechanism: "AWS_MSK_IAM"}); !strings.Contains(msg, "error") {
		t.Fatalf("AWS_PROFILE naming no profile: %s, want an error", msg)
	}
}

// Web identity (EKS IRSA): the token file is read and sent to STS's
// AssumeRoleWithWebIdentity with the role; the credentials STS answers are
// cached until they expire, then fetched again (the file read anew).
// Without a region the error says which variable to set.
func TestAWSMSKIAMWebIdentity(t *testing.T) {
	isolateAWS(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("web-identity-token-1"), 0o600); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	var lastToken, lastRole atomic.Value
	sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "AssumeRoleWithWebIdentity" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		n := calls.Add(1)
		lastToken.Store(r.Form.Get("WebIdentityToken"))
		lastRole.Store(r.Form.Get("RoleArn"))
		// The first credentials expire in 2s, so the next authentication
		// after that must call STS again.
		exp := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
		if n > 1 {
			exp = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		}
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIAWEBID%d</AccessKeyId><SecretAccessKey>sts-secret</SecretAccessKey><SessionToken>STSTOKEN%d</SessionToken><Expiration>%s</Expiration></Credentials>
<SubjectFromWebIdentityToken>system:serviceaccount:outbox:relay</SubjectFromWebIdentityToken></AssumeRoleWithWebIdentityResult>
<ResponseMetadata><RequestId>r-%d</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`, n, n, exp, n)
	}))
	defer sts.Close()
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", tokenFile)
	t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/relay")
	t.Setenv("AWS_ENDPOINT_URL_STS", sts.URL)

	if msg := awsFirst(t, &kafkasasl.Config{Mechanism: "AWS_MSK_IAM"}); !strings.Contains(msg, "AWS_REGION") || !strings.Contains(msg, "mechanism error") {
		t.Fatalf("web identity without a region: %s, want an error naming AWS_REGION", msg)
	}
	t.Setenv("AWS_DEFAULT_REGION", "eu-west-1")
	m, err := (&kafkasasl.Config{Mechanism: "AWS_MSK_IAM"}).KafkaMechanism()
	if err != nil {
		t.Fatal(err)
	}
	auth := func() string {
		t.Helper()
		_, msg, err := m.Authenticate(context.Background(), mskHost)
		if err != nil {
			t.Fatal(err)
		}
		return string(msg)
	}
	if msg := auth(); !strings.Contains(msg, "ASIAWEBID1") || !strings.Contains(msg, "STSTOKEN1") || strings.Contains(msg, "sts-secret") {
		t.Fatalf("first message %s: want STS's access key and session token, never its secret", msg)
	}
	if tok, role := lastToken.Load(), lastRole.Load(); tok != "web-identity-token-1" || role != "arn:aws:iam::123456789012:role/relay" {
		t.Fatalf("STS got token %v, role %v", tok, role)
	}
	if msg := auth(); !strings.Contains(msg, "ASIAWEBID1") || calls.Load() != 1 {
		t.Fatalf("second authentication: %s after %d STS calls, want the cached credentials", msg, calls.Load())
	}
	if err := os.WriteFile(tokenFile, []byte("web-identity-token-2"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if msg := auth(); !strings.Contains(msg, "ASIAWEBID2") || calls.Load() != 2 || lastToken.Load() != "web-identity-token-2" {
		t.Fatalf("after expiry: %s after %d STS calls (token %v), want refreshed credentials from the new token", msg, calls.Load(), lastToken.Load())
	}
}

// The default chain's source is logged once per mechanism (a silent fall
// back to the node's role would otherwise go unseen), never the keys.
func TestAWSMSKIAMLogsTheSourceOnce(t *testing.T) {
	const secret = "SECRET-never-logged"
	isolateAWS(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAFROMENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	m, err := (&kafkasasl.Config{Mechanism: "AWS_MSK_IAM"}).KafkaMechanism()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, _, err := m.Authenticate(context.Background(), mskHost); err != nil {
			t.Fatal(err)
		}
	}
	out := buf.String()
	if n := strings.Count(out, "credentials from the default chain"); n != 1 || !strings.Contains(out, "source=EnvConfigCredentials") {
		t.Fatalf("logged %d times (want once, naming the environment):\n%s", n, out)
	}
	if strings.Contains(out, secret) || strings.Contains(out, "AKIAFROMENV") {
		t.Fatalf("a credential reached the log:\n%s", out)
	}
}
