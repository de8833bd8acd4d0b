package relay

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
)

// awsUserAgent is the user agent AWS_MSK_IAM sends (an IAM policy may
// match it with aws:UserAgent).
const awsUserAgent = "pgoutbox-relay"

// awsChain names, in the order the AWS SDK for Go v2 tries them, the
// sources of AWS_MSK_IAM credentials when no SASL username is given.
const awsChain = "the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), " +
	"the shared config and credentials files (AWS_PROFILE, AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE), " +
	"web identity (AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN, as EKS IRSA sets them; needs a region), " +
	"ECS container credentials (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI), " +
	"then the EC2 instance metadata service (IMDS)"

// Environment variables of the region STS (web identity) needs.
const (
	envAWSRegion        = "AWS_REGION"
	envAWSDefaultRegion = "AWS_DEFAULT_REGION"
	envAWSWebIdentity   = "AWS_WEB_IDENTITY_TOKEN_FILE"
)

// awsMechanism is the AWS_MSK_IAM mechanism of s: its static keys (the
// username and password, with the session token) when a username is
// given, else the AWS SDK's default credential chain, whose source
// (environment, profile, web identity, ECS, IMDS) logger, when not nil,
// is told once: a silent fall back to the node's role shows. Its errors
// never carry a credential.
func awsMechanism(s *SASL, logger *slog.Logger) (sasl.Mechanism, error) {
	if s.Username != "" { // with the password: check says so
		a := aws.Auth{AccessKey: s.Username, SecretKey: s.Password, SessionToken: s.SessionToken, UserAgent: awsUserAgent}
		return a.AsManagedStreamingIAMMechanism(), nil
	}
	creds, region, err := awsDefaultCredentials()
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return aws.ManagedStreamingIAM(func(ctx context.Context) (aws.Auth, error) {
		a, source, err := awsRetrieve(ctx, creds, region)
		if err == nil && logger != nil {
			once.Do(func() {
				logger.Info("AWS_MSK_IAM: credentials from the AWS default chain", "source", source, "region", region)
			})
		}
		return a, err
	}), nil
}

// awsDefaultCredentials loads the SDK's default configuration (no network
// call: sources are tried at the first retrieval) and returns its
// credentials provider, which the SDK wraps in its cache: credentials are
// reused until shortly before they expire, then fetched again. region is
// the resolved region ("" for none).
func awsDefaultCredentials() (awssdk.CredentialsProvider, string, error) {
	cfg, err := awsconfig.LoadDefaultConfig(context.Background())
	if err != nil {
		return nil, "", fmt.Errorf("AWS_MSK_IAM: load the AWS configuration: %w", err)
	}
	if cfg.Region == "" && os.Getenv(envAWSWebIdentity) != "" {
		return nil, "", fmt.Errorf("AWS_MSK_IAM: %s is set, and web identity calls STS, which needs a region: set %s (or %s, or region in the AWS profile)",
			envAWSWebIdentity, envAWSRegion, envAWSDefaultRegion)
	}
	if cfg.Credentials == nil {
		return nil, "", errors.New("AWS_MSK_IAM: the AWS configuration has no credentials provider")
	}
	return cfg.Credentials, cfg.Region, nil
}

// awsRetrieve fetches credentials from creds (cached by the SDK) for one
// authentication, and names the provider that gave them (the SDK's
// Credentials.Source, such as EnvConfigCredentials or EC2RoleProvider).
func awsRetrieve(ctx context.Context, creds awssdk.CredentialsProvider, region string) (aws.Auth, string, error) {
	c, err := creds.Retrieve(ctx)
	if err != nil {
		hint := ""
		if region == "" {
			hint = fmt.Sprintf(" (no region is set: web identity and a profile's role need one, %s or %s)", envAWSRegion, envAWSDefaultRegion)
		}
		return aws.Auth{}, "", fmt.Errorf("AWS_MSK_IAM: no AWS credentials from the SASL username and password nor from the default chain (%s)%s: %w", awsChain, hint, err)
	}
	return aws.Auth{AccessKey: c.AccessKeyID, SecretKey: c.SecretAccessKey, SessionToken: c.SessionToken, UserAgent: awsUserAgent}, c.Source, nil
}
