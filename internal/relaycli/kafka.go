package relaycli

import (
	"crypto/tls"
	"crypto/x509"
	"os"

	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
	"github.com/urfave/cli/v2"
)

// tlsConfig builds the broker TLS configuration; nil means plaintext.
func tlsConfig(c *cli.Context) (*tls.Config, error) {
	caFile, certFile, keyFile := c.String(flagTLSCAFile), c.String(flagTLSCertFile), c.String(flagTLSKeyFile)
	insecure := c.Bool(flagTLSInsecure)
	if !c.Bool(flagTLS) && caFile == "" && certFile == "" && keyFile == "" && !insecure {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure} // #nosec G402 -- opt-in flag
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, usagef("--%s: %v", flagTLSCAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("--%s: %s holds no PEM certificate", flagTLSCAFile, caFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case certFile != "" && keyFile != "":
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, usagef("--%s/--%s: %v", flagTLSCertFile, flagTLSKeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case certFile != "":
		return nil, usagef("--%s needs --%s", flagTLSCertFile, flagTLSKeyFile)
	case keyFile != "":
		return nil, usagef("--%s needs --%s", flagTLSKeyFile, flagTLSCertFile)
	}
	return cfg, nil
}

// saslMechanism builds the broker SASL mechanism; nil means none.
func saslMechanism(c *cli.Context) (sasl.Mechanism, error) {
	mech, user, pass := c.String(flagSASLMechanism), c.String(flagSASLUsername), c.String(flagSASLPassword)
	if mech == "" {
		if user != "" || pass != "" {
			return nil, usagef("--%s is required with a SASL user name or password", flagSASLMechanism)
		}
		return nil, nil
	}
	if user == "" {
		return nil, usagef("--%s is required with --%s", flagSASLUsername, flagSASLMechanism)
	}
	switch mech {
	case "plain":
		return plain.Mechanism{Username: user, Password: pass}, nil
	case "scram-sha-256", "scram-sha-512":
		algo := scram.SHA256
		if mech == "scram-sha-512" {
			algo = scram.SHA512
		}
		m, err := scram.Mechanism(algo, user, pass)
		if err != nil {
			// The error is about the user name or password encoding;
			// never echo them.
			return nil, usagef("--%s: cannot prepare %s credentials (invalid characters in the user name or password)", flagSASLMechanism, mech)
		}
		return m, nil
	}
	return nil, usagef("--%s: %q is not one of plain, scram-sha-256, scram-sha-512", flagSASLMechanism, mech)
}
