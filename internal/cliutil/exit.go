package cliutil

import (
	"errors"
	"fmt"
)

// Exit codes of every pgoutbox command.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// UsageError marks bad arguments: an unknown flag, command or value, a
// missing required flag. It maps to ExitUsage.
type UsageError struct{ Err error }

// Error returns the message of the wrapped error.
func (e UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return UsageError{fmt.Errorf(format, args...)}
}

// IsUsage reports whether err is (or wraps) a UsageError.
func IsUsage(err error) bool {
	var ue UsageError
	return errors.As(err, &ue)
}

// exitCode is the default mapping of an error to an exit code: nil is
// ExitOK, a UsageError ExitUsage, anything else ExitFailure.
func exitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case IsUsage(err):
		return ExitUsage
	}
	return ExitFailure
}
