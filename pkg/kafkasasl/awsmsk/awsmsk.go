package awsmsk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"

	"github.com/pgoutbox/pgoutbox/pkg/kafkasasl"
)

func init() { kafkasasl.RegisterAWSMSKIAM(Mechanism) }

// userAgent is the user agent AWS_MSK_IAM sends (an IAM policy may match
// it with aws:UserAgent). The inbox sends it too: it is the name policies
// were written against before the mechanism moved out of the relay.
const userAgent = "pgoutbox-relay"

// chain names, in the order the AWS SDK for Go v2 tries them, the sources
// of AWS_MSK_IAM credentials when no SASL username is given.
const chain = "the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), " +
	"the shared config and credentials files (AWS_PROFILE, AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE), " +
	"web identity (AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN, as EKS IRSA sets them; needs a region), " +
	"ECS container credentials (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI), " +
	"then the EC2 instance metadata service (IMDS)"

// Environment variables of the region STS (web identity) needs.
const (
	envRegion        = "AWS_REGION"
	envDefaultRegion = "AWS_DEFAULT_REGION"
	envWebIdentity   = "AWS_WEB_IDENTITY_TOKEN_FILE"
)

// Mechanism is the AWS_MSK_IAM mechanism of c: its static keys (the
// username and password, with the session token) when a username is
// given, else the AWS SDK's default credential chain (no network call
// until the first authentication). Its errors never carry a credential.
func Mechanism(c *kafkasasl.Config) (sasl.Mechanism, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	if c.Username != "" { // with the password: Check says so
		a := aws.Auth{AccessKey: c.Username, SecretKey: c.Password, SessionToken: c.SessionToken, UserAgent: userAgent}
		return a.AsManagedStreamingIAMMechanism(), nil
	}
	creds, region, err := defaultCredentials()
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return aws.ManagedStreamingIAM(func(ctx context.Context) (aws.Auth, error) {
		a, source, err := retrieve(ctx, creds, region)
		if err == nil {
			once.Do(func() {
				slog.Default().Info("AWS_MSK_IAM: credentials from the default chain", "source", source)
			})
		}
		return a, err
	}), nil
}

// defaultCredentials loads the SDK's default configuration (no network
// call: sources are tried at the first retrieval) and returns its
// credentials provider, which the SDK wraps in its cache: credentials are
// reused until shortly before they expire, then fetched again. region is
// the resolved region ("" for none).
func defaultCredentials() (awssdk.CredentialsProvider, string, error) {
	cfg, err := awsconfig.LoadDefaultConfig(context.Background())
	if err != nil {
		return nil, "", fmt.Errorf("AWS_MSK_IAM: load the AWS configuration: %w", err)
	}
	if cfg.Region == "" && os.Getenv(envWebIdentity) != "" {
		return nil, "", fmt.Errorf("AWS_MSK_IAM: %s is set, and web identity calls STS, which needs a region: set %s (or %s, or region in the AWS profile)",
			envWebIdentity, envRegion, envDefaultRegion)
	}
	if cfg.Credentials == nil {
		return nil, "", errors.New("AWS_MSK_IAM: the AWS configuration has no credentials provider")
	}
	return cfg.Credentials, cfg.Region, nil
}

// retrieve fetches credentials from creds (cached by the SDK) for one
// authentication, with the name of the provider that gave them.
func retrieve(ctx context.Context, creds awssdk.CredentialsProvider, region string) (aws.Auth, string, error) {
	c, err := creds.Retrieve(ctx)
	if err != nil {
		hint := ""
		if region == "" {
			hint = fmt.Sprintf(" (no region is set: web identity and a profile's role need one, %s or %s)", envRegion, envDefaultRegion)
		}
		return aws.Auth{}, "", fmt.Errorf("AWS_MSK_IAM: no AWS credentials from the SASL username and password nor from the default chain (%s)%s: %w", chain, hint, err)
	}
	return aws.Auth{AccessKey: c.AccessKeyID, SecretKey: c.SecretAccessKey, SessionToken: c.SessionToken, UserAgent: userAgent}, c.Source, nil
}
