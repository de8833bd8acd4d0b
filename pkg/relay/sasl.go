package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// errNoToken is the error of an OAUTHBEARER token file holding nothing.
var errNoToken = errors.New("the OAUTHBEARER token file is empty")

// KafkaMechanism is s as a franz-go SASL mechanism (for kgo.SASL): what
// the relay's Kafka clients authenticate with, for a kgo client of your
// own beside the relay. OAUTHBEARER reads TokenFile at every
// authentication; AWS_MSK_IAM without a Username loads the AWS SDK's
// default credential chain (no network call until the first
// authentication). Its errors never carry a credential.
func (s *SASL) KafkaMechanism() (sasl.Mechanism, error) {
	return s.mechanism(nil)
}

// mechanism is KafkaMechanism; logger, when not nil, is told once which
// source of the AWS chain gave AWS_MSK_IAM its credentials.
func (s *SASL) mechanism(logger *slog.Logger) (sasl.Mechanism, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	switch strings.ToUpper(s.Mechanism) {
	case SASLPlain:
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism(), nil
	case SASLSCRAMSHA256:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism(), nil
	case SASLSCRAMSHA512:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism(), nil
	case SASLOAuthBearer:
		file := s.TokenFile
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			tok, err := readToken(file)
			return oauth.Auth{Token: tok}, err
		}), nil
	default: // SASLAWSMSKIAM, the only other mechanism check lets through
		return awsMechanism(s, logger)
	}
}

// check reports what s lacks for its mechanism, before any connection and
// without reading a file or the environment: the one table of what each
// mechanism needs (WithDefaults calls it; KafkaMechanism too, before it
// builds). Its errors never carry a credential.
func (s *SASL) check() error {
	switch strings.ToUpper(s.Mechanism) {
	case SASLPlain, SASLSCRAMSHA256, SASLSCRAMSHA512:
		if s.Username == "" {
			return fmt.Errorf("SASL %s needs a username", s.Mechanism)
		}
	case SASLOAuthBearer:
		if s.TokenFile == "" {
			return errors.New("SASL OAUTHBEARER needs a token file")
		}
	case SASLAWSMSKIAM:
		if s.Username != "" && s.Password == "" {
			return errors.New("AWS_MSK_IAM with a SASL username (the access key ID) needs the password (the secret access key)")
		}
		if s.Username == "" && (s.Password != "" || s.SessionToken != "") {
			return errors.New("AWS_MSK_IAM: a SASL password or session token needs the username (the access key ID)")
		}
	default:
		return fmt.Errorf("SASL mechanism %q: want one of %s", s.Mechanism, strings.Join(SASLMechanisms, ", "))
	}
	return nil
}

// readToken reads an OAUTHBEARER token from file. It is read at every
// authentication, so a token refreshed by another process (a sidecar, a
// Kubernetes projected volume) is used from the next connection or
// re-authentication on.
func readToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read the OAUTHBEARER token file: %w", err)
	}
	tok := string(bytes.TrimSpace(b))
	if tok == "" {
		return "", fmt.Errorf("%w: %s", errNoToken, file)
	}
	return tok, nil
}
