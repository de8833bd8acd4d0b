package kafkasasl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// errNoToken is the error of an OAUTHBEARER token file holding nothing.
var errNoToken = errors.New("the OAUTHBEARER token file is empty")

// ErrNotLinked is the error of KafkaMechanism for AWS_MSK_IAM in a
// program that does not import package awsmsk.
var ErrNotLinked = errors.New(`AWS_MSK_IAM is not linked into this program: import _ "github.com/pgoutbox/pgoutbox/pkg/kafkasasl/awsmsk"`)

var (
	awsMu sync.RWMutex
	awsFn func(*Config) (sasl.Mechanism, error)
)

// RegisterAWSMSKIAM sets the builder of the AWS_MSK_IAM mechanism. Package
// awsmsk calls it when it is imported; a program calls it only to
// replace that builder (a test, another credential source).
func RegisterAWSMSKIAM(build func(*Config) (sasl.Mechanism, error)) {
	awsMu.Lock()
	defer awsMu.Unlock()
	awsFn = build
}

// KafkaMechanism is c as a franz-go SASL mechanism (for kgo.SASL).
// OAUTHBEARER reads TokenFile at every authentication; AWS_MSK_IAM is
// built by package awsmsk (ErrNotLinked without it). Its errors never
// carry a credential.
func (c *Config) KafkaMechanism() (sasl.Mechanism, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	switch strings.ToUpper(c.Mechanism) {
	case Plain:
		return plain.Auth{User: c.Username, Pass: c.Password}.AsMechanism(), nil
	case SCRAMSHA256:
		return scram.Auth{User: c.Username, Pass: c.Password}.AsSha256Mechanism(), nil
	case SCRAMSHA512:
		return scram.Auth{User: c.Username, Pass: c.Password}.AsSha512Mechanism(), nil
	case OAuthBearer:
		file := c.TokenFile
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			tok, err := readToken(file)
			return oauth.Auth{Token: tok}, err
		}), nil
	default: // AWSMSKIAM, the only other mechanism Check lets through
		awsMu.RLock()
		build := awsFn
		awsMu.RUnlock()
		if build == nil {
			return nil, ErrNotLinked
		}
		return build(c)
	}
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
