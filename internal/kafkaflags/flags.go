package kafkaflags

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/pkg/kafkasasl"
	// The flags offer aws-msk-iam: every program that reads them speaks it.
	_ "github.com/pgoutbox/pgoutbox/pkg/kafkasasl/awsmsk"
)

// Flag names.
const (
	FlagTLS           = "kafka-tls"
	FlagTLSCAFile     = "kafka-tls-ca-file"
	FlagTLSCertFile   = "kafka-tls-cert-file"
	FlagTLSKeyFile    = "kafka-tls-key-file"
	FlagTLSInsecure   = "kafka-tls-insecure-skip-verify"
	FlagSASLMechanism = "kafka-sasl-mechanism"
	FlagSASLUsername  = "kafka-sasl-username"
	FlagSASLPassword  = "kafka-sasl-password"
	FlagSASLTokenFile = "kafka-sasl-token-file"
	FlagSASLInsecure  = "kafka-allow-insecure-sasl"
)

// EnvFunc names a flag's environment variable (RELAY_KAFKA_TLS).
type EnvFunc func(flag string) string

// Flags returns the Kafka TLS and SASL flags, in category, reading
// environment variables named by env. Flags are built afresh per run:
// urfave/cli stores parsed values in them.
func Flags(env EnvFunc, category string) []cli.Flag {
	// Every flag is in category and reads env(its name).
	str := func(name, usage string) cli.Flag {
		return &cli.StringFlag{Name: name, Category: category, EnvVars: []string{env(name)}, Usage: usage}
	}
	boolean := func(name, usage string) cli.Flag {
		return &cli.BoolFlag{Name: name, Category: category, EnvVars: []string{env(name)}, Usage: usage}
	}
	return []cli.Flag{
		boolean(FlagTLS, "connect to the brokers with TLS (implied by any --kafka-tls-* file)"),
		str(FlagTLSCAFile, "PEM CA bundle to verify the brokers (default: the system roots)"),
		str(FlagTLSCertFile, "PEM client certificate for mutual TLS (with --kafka-tls-key-file)"),
		str(FlagTLSKeyFile, "PEM client key for mutual TLS (with --kafka-tls-cert-file)"),
		boolean(FlagTLSInsecure, "do not verify the brokers' certificates (testing only)"),
		str(FlagSASLMechanism, "SASL mechanism: plain, scram-sha-256, scram-sha-512, oauthbearer or aws-msk-iam (default: no SASL; needs --kafka-tls)"),
		str(FlagSASLUsername, "SASL user name (aws-msk-iam: a static access key ID, with the secret key as password; without it, the AWS SDK's default chain: AWS_ACCESS_KEY_ID..., AWS_PROFILE, web identity (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN, AWS_REGION), ECS, IMDS; refreshed before expiry)"),
		str(FlagSASLPassword, "SASL password; prefer "+env(FlagSASLPassword)+" or "+env(FlagSASLPassword)+cliutil.FileSuffix+" (a file holding it): a flag is visible in ps. Never logged"),
		str(FlagSASLTokenFile, "oauthbearer: file holding the token, read again at every authentication (so a refreshed token is used)"),
		boolean(FlagSASLInsecure, "allow SASL without --kafka-tls (PLAIN then sends the password in clear); for local test brokers only"),
	}
}

// Security is what the flags configure.
type Security struct {
	// TLS is nil for plaintext.
	TLS *tls.Config
	// SASL is nil for none.
	SASL *kafkasasl.Config
	// Password is the SASL password (empty without SASL), to scrub from
	// output; PasswordOnCommandLine says it was given as a flag.
	Password              string
	PasswordOnCommandLine bool
}

// Read validates the flags of c. Every error is a cliutil.UsageError
// naming the flag.
func Read(c *cli.Context, env EnvFunc) (Security, error) {
	var s Security
	var err error
	if s.TLS, err = tlsConfig(c); err != nil {
		return s, err
	}
	pw, err := cliutil.ReadSecret(c, FlagSASLPassword, env(FlagSASLPassword))
	if err != nil {
		return s, err
	}
	s.Password, s.PasswordOnCommandLine = pw.Value, pw.OnCommandLine
	if s.SASL, err = saslConfig(c, pw.Value); err != nil {
		return s, err
	}
	if s.SASL != nil && s.TLS == nil && !c.Bool(FlagSASLInsecure) {
		return s, cliutil.Usagef("--%s %s without --%s would send the credentials over a plaintext connection; add --%s (or --%s for a local test broker)",
			FlagSASLMechanism, c.String(FlagSASLMechanism), FlagTLS, FlagTLS, FlagSASLInsecure)
	}
	return s, nil
}

// TLSNames name the flags of one connection's TLS: the Kafka brokers'
// (FlagTLS and the FlagTLS* files) or another broker's. An empty name is
// a flag the command does not have.
type TLSNames struct {
	// On enables TLS with the system's roots; any file implies it.
	On string
	// CAFile, CertFile and KeyFile are the PEM CA bundle, and the client
	// certificate and key for mutual TLS.
	CAFile, CertFile, KeyFile string
	// Insecure skips the verification of the server's certificate.
	Insecure string
}

// kafkaTLS are the Kafka brokers' TLS flags.
var kafkaTLS = TLSNames{On: FlagTLS, CAFile: FlagTLSCAFile, CertFile: FlagTLSCertFile, KeyFile: FlagTLSKeyFile, Insecure: FlagTLSInsecure}

// tlsConfig builds the broker TLS configuration; nil means plaintext.
func tlsConfig(c *cli.Context) (*tls.Config, error) { return ReadTLS(c, kafkaTLS) }

// ReadTLS builds the TLS configuration the flags n name set; nil means
// plaintext. Every error is a cliutil.UsageError naming the flag.
func ReadTLS(c *cli.Context, n TLSNames) (*tls.Config, error) {
	flag := func(name string) string {
		if name == "" {
			return ""
		}
		return c.String(name)
	}
	caFile, certFile, keyFile := flag(n.CAFile), flag(n.CertFile), flag(n.KeyFile)
	insecure := n.Insecure != "" && c.Bool(n.Insecure)
	if !(n.On != "" && c.Bool(n.On)) && caFile == "" && certFile == "" && keyFile == "" && !insecure {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure} // #nosec G402 -- opt-in flag
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, cliutil.Usagef("--%s: %v", n.CAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, cliutil.Usagef("--%s: %s holds no PEM certificate", n.CAFile, caFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case certFile != "" && keyFile != "":
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, cliutil.Usagef("--%s/--%s: %v", n.CertFile, n.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case certFile != "":
		return nil, cliutil.Usagef("--%s needs --%s", n.CertFile, n.KeyFile)
	case keyFile != "":
		return nil, cliutil.Usagef("--%s needs --%s", n.KeyFile, n.CertFile)
	}
	return cfg, nil
}

// saslConfig reads the SASL flags; nil means none.
func saslConfig(c *cli.Context, pass string) (*kafkasasl.Config, error) {
	mech, user, token := c.String(FlagSASLMechanism), c.String(FlagSASLUsername), c.String(FlagSASLTokenFile)
	if mech == "" {
		if user != "" || pass != "" || token != "" {
			return nil, cliutil.Usagef("--%s is required with a SASL user name, password or token file", FlagSASLMechanism)
		}
		return nil, nil
	}
	s := &kafkasasl.Config{Username: user, Password: pass, TokenFile: token}
	switch strings.ToLower(mech) {
	case "plain":
		s.Mechanism = kafkasasl.Plain
	case "scram-sha-256":
		s.Mechanism = kafkasasl.SCRAMSHA256
	case "scram-sha-512":
		s.Mechanism = kafkasasl.SCRAMSHA512
	case "oauthbearer":
		s.Mechanism = kafkasasl.OAuthBearer
		if token == "" {
			return nil, cliutil.Usagef("--%s is required with --%s oauthbearer", FlagSASLTokenFile, FlagSASLMechanism)
		}
		return s, nil
	case "aws-msk-iam", "aws_msk_iam":
		s.Mechanism = kafkasasl.AWSMSKIAM
		// Static keys are a username (access key ID) and password
		// (secret key); neither means the AWS SDK's default chain.
		if user == "" && pass != "" {
			return nil, cliutil.Usagef("--%s %s: a password (secret access key) needs --%s (the access key ID); give neither for the AWS default credential chain", FlagSASLMechanism, mech, FlagSASLUsername)
		}
		return s, nil
	default:
		return nil, cliutil.Usagef("--%s: %q is not one of plain, scram-sha-256, scram-sha-512, oauthbearer, aws-msk-iam", FlagSASLMechanism, mech)
	}
	if user == "" {
		return nil, cliutil.Usagef("--%s is required with --%s", FlagSASLUsername, FlagSASLMechanism)
	}
	return s, nil
}
