package kafkasasl

import (
	"errors"
	"fmt"
	"strings"
)

// Config is the SASL mechanism and credentials a Kafka client
// authenticates to the brokers with. None of it is ever logged.
type Config struct {
	// Mechanism is Plain, SCRAMSHA256, SCRAMSHA512, OAuthBearer or
	// AWSMSKIAM (case does not matter).
	Mechanism string
	// Username and Password: PLAIN and SCRAM credentials; for
	// AWS_MSK_IAM the access key ID and secret access key.
	Username string
	Password string
	// TokenFile is the file holding the OAUTHBEARER token.
	TokenFile string
	// SessionToken is the AWS_MSK_IAM session token, when the
	// credentials are temporary.
	SessionToken string
}

// SASL mechanisms, as Kafka names them.
const (
	Plain       = "PLAIN"
	SCRAMSHA256 = "SCRAM-SHA-256"
	SCRAMSHA512 = "SCRAM-SHA-512"
	// OAuthBearer authenticates with a token read from Config.TokenFile
	// at every authentication, so a token another process refreshes in
	// the file is picked up.
	OAuthBearer = "OAUTHBEARER"
	// AWSMSKIAM authenticates to Amazon MSK with IAM: Username is the
	// access key ID, Password the secret access key, SessionToken the
	// session token; with Username empty, the AWS SDK's default
	// credential chain. It needs package awsmsk imported.
	AWSMSKIAM = "AWS_MSK_IAM"
)

// Mechanisms lists the SASL mechanisms Config names.
var Mechanisms = []string{Plain, SCRAMSHA256, SCRAMSHA512, OAuthBearer, AWSMSKIAM}

// Check reports what c lacks for its mechanism, before any connection
// and without reading a file or the environment: the one table of what
// each mechanism needs. KafkaMechanism runs it before it builds. Its
// errors never carry a credential.
func (c *Config) Check() error {
	switch strings.ToUpper(c.Mechanism) {
	case Plain, SCRAMSHA256, SCRAMSHA512:
		if c.Username == "" {
			return fmt.Errorf("SASL %s needs a username", c.Mechanism)
		}
	case OAuthBearer:
		if c.TokenFile == "" {
			return errors.New("SASL OAUTHBEARER needs a token file")
		}
	case AWSMSKIAM:
		if c.Username != "" && c.Password == "" {
			return errors.New("AWS_MSK_IAM with a SASL username (the access key ID) needs the password (the secret access key)")
		}
		if c.Username == "" && (c.Password != "" || c.SessionToken != "") {
			return errors.New("AWS_MSK_IAM: a SASL password or session token needs the username (the access key ID)")
		}
	default:
		return fmt.Errorf("SASL mechanism %q: want one of %s", c.Mechanism, strings.Join(Mechanisms, ", "))
	}
	return nil
}
