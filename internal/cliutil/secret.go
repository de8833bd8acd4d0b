package cliutil

import (
	"log/slog"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/redact"
)

// FileSuffix is appended to a secret's environment variable to name a file
// holding the secret instead (RELAY_DATABASE_URL_FILE), the convention of
// Docker and Kubernetes secrets.
const FileSuffix = "_FILE"

// Secret is a secret flag's value and where it came from.
type Secret struct {
	Value string
	// OnCommandLine is true when the value was given as a flag, where
	// other users of the host can read it (ps, /proc/PID/cmdline).
	OnCommandLine bool
}

// ReadSecret returns the secret flag name of c: from the command line or
// its environment variable env, else from the file named by env+FileSuffix
// (one trailing newline dropped). Setting both env and env+FileSuffix is a
// usage error, as is a file that cannot be read; the error names the
// variable and the path, never the content.
func ReadSecret(c *cli.Context, name, env string) (Secret, error) {
	envValue, inEnv := os.LookupEnv(env)
	path, inFile := os.LookupEnv(env + FileSuffix)
	if inEnv && inFile {
		return Secret{}, Usagef("set %s or %s, not both", env, env+FileSuffix)
	}
	if c.IsSet(name) {
		v := c.String(name)
		return Secret{Value: v, OnCommandLine: !inEnv || v != envValue}, nil
	}
	if !inFile {
		return Secret{}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Secret{}, Usagef("%s: %v", env+FileSuffix, err)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if v == "" {
		return Secret{}, Usagef("%s: %s is empty", env+FileSuffix, path)
	}
	return Secret{Value: v}, nil
}

// commandLineWarning is the log message for a secret given as a flag.
const commandLineWarning = "credentials given on the command line can be read by other users of this host (ps, /proc/PID/cmdline); use the environment variable or its *_FILE variant instead"

// WarnSecretFlag logs commandLineWarning for the secret given as --flag;
// env is its environment variable, to use instead (or env+FileSuffix).
func WarnSecretFlag(log *slog.Logger, flag, env string) {
	log.Warn(commandLineWarning, "flag", "--"+flag, "instead", env+" or "+env+FileSuffix)
}

// URLExposed reports whether the connection string s was given on the
// command line and holds a secret (a password, an sslpassword, a token):
// a URL without one hides nothing.
func URLExposed(s Secret) bool {
	return s.OnCommandLine && len(redact.Secrets(s.Value)) > 0
}
