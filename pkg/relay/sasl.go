package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	switch strings.ToUpper(s.Mechanism) {
	case SASLPlain:
		if s.Username == "" {
			return nil, errors.New("SASL PLAIN needs a username")
		}
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism(), nil
	case SASLSCRAMSHA256, SASLSCRAMSHA512:
		if s.Username == "" {
			return nil, fmt.Errorf("SASL %s needs a username", s.Mechanism)
		}
		a := scram.Auth{User: s.Username, Pass: s.Password}
		if strings.EqualFold(s.Mechanism, SASLSCRAMSHA512) {
			return a.AsSha512Mechanism(), nil
		}
		return a.AsSha256Mechanism(), nil
	case SASLOAuthBearer:
		if s.TokenFile == "" {
			return nil, errors.New("SASL OAUTHBEARER needs a token file")
		}
		file := s.TokenFile
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			tok, err := readToken(file)
			return oauth.Auth{Token: tok}, err
		}), nil
	case SASLAWSMSKIAM:
		return awsMechanism(s)
	}
	return nil, fmt.Errorf("SASL mechanism %q: want one of %s", s.Mechanism, strings.Join(SASLMechanisms, ", "))
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
