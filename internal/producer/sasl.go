package producer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SASL is a SASL mechanism and its credentials: relay.SASL's fields,
// declared once in relaytype (which documents them); a defined type of
// it, so that the client's methods can hang on it and a *relay.SASL
// converts to it as it is.
type SASL relaytype.SASL

// errNoToken is the error of an OAUTHBEARER token file holding nothing.
var errNoToken = errors.New("the OAUTHBEARER token file is empty")

// mechanism builds s's franz-go mechanism. Its errors never carry a
// credential.
func (s *SASL) mechanism() (sasl.Mechanism, error) {
	switch strings.ToUpper(s.Mechanism) {
	case relaytype.SASLPlain:
		if s.Username == "" {
			return nil, errors.New("SASL PLAIN needs a username")
		}
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism(), nil
	case relaytype.SASLSCRAMSHA256, relaytype.SASLSCRAMSHA512:
		if s.Username == "" {
			return nil, fmt.Errorf("SASL %s needs a username", s.Mechanism)
		}
		a := scram.Auth{User: s.Username, Pass: s.Password}
		if strings.EqualFold(s.Mechanism, relaytype.SASLSCRAMSHA512) {
			return a.AsSha512Mechanism(), nil
		}
		return a.AsSha256Mechanism(), nil
	case relaytype.SASLOAuthBearer:
		if s.TokenFile == "" {
			return nil, errors.New("SASL OAUTHBEARER needs a token file")
		}
		file := s.TokenFile
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			tok, err := readToken(file)
			return oauth.Auth{Token: tok}, err
		}), nil
	case relaytype.SASLAWSMSKIAM:
		return awsMechanism(s)
	}
	return nil, fmt.Errorf("SASL mechanism %q: want one of %s", s.Mechanism, strings.Join(relaytype.SASLMechanisms, ", "))
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

// MechanismOf is s's franz-go mechanism (for tests of the mechanisms kfake
// does not speak).
func MechanismOf(s *SASL) (sasl.Mechanism, error) { return s.mechanism() }
