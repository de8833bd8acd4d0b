package cliutil

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"

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
	v, err := ReadSecretFile(path)
	if err != nil {
		return Secret{}, Usagef("%s: %v", env+FileSuffix, err)
	}
	return Secret{Value: v}, nil
}

// MaxSecretFile is the largest secret file ReadSecretFile reads: a
// connection string or a password is far smaller, and a path to a device
// (/dev/zero) or a log file must not fill the memory.
const MaxSecretFile = 64 << 10

// ReadSecretFile reads the secret held by the file at path, one trailing
// newline dropped. The file must be a regular file (a symbolic link to
// one, as a Kubernetes Secret volume has, is followed) of at most
// MaxSecretFile bytes, and not empty: a FIFO, a device or a directory is
// refused before it is read, so a reload never blocks or reads without
// end. Errors name the path, never the content.
func ReadSecretFile(path string) (string, error) {
	if err := secretFileMode(path); err != nil {
		return "", err
	}
	// O_NONBLOCK: a FIFO put in the file's place after the check above
	// must not block the open.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if err := secretFileInfo(path, fi); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSecretFile+1))
	if err != nil {
		return "", err
	}
	if len(b) > MaxSecretFile {
		return "", fmt.Errorf("%s: larger than %d bytes: not a secret file", path, MaxSecretFile)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if v == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return v, nil
}

// secretFileMode checks what path names before it is opened.
func secretFileMode(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return secretFileInfo(path, fi)
}

// secretFileInfo refuses a file that is not regular or is too large.
func secretFileInfo(path string, fi os.FileInfo) error {
	switch {
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s: not a regular file (%s): a secret is read from a file", path, fi.Mode().Type())
	case fi.Size() > MaxSecretFile:
		return fmt.Errorf("%s: %d bytes, larger than %d: not a secret file", path, fi.Size(), MaxSecretFile)
	}
	return nil
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
