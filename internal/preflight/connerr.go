package preflight

import (
	"errors"
	"fmt"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// ConnectError words a failed connection for the one line on stderr; err
// comes back as it is when it holds no *pgconn.ConnectError. When the
// server answered (a missing database, a bad password), its answer is the
// error: under sslmode=prefer pgconn also reports the TLS attempt the
// server refused before it, which reads like the cause and is not. When
// every attempt failed to dial with the same error (sslmode=prefer dials
// twice), the dial error is said once, and it names the address. Anything
// else (several hosts failing differently) keeps pgconn's whole error.
func ConnectError(err error) error {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return err
	}
	who := fmt.Sprintf("user=%s database=%s", ce.Config.User, ce.Config.Database)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return fmt.Errorf("database refused the connection (%s): %w", who, pgErr)
	}
	attempts := []error{ce.Unwrap()}
	if joined, ok := ce.Unwrap().(interface{ Unwrap() []error }); ok {
		attempts = joined.Unwrap()
	}
	var dial *net.OpError
	for _, a := range attempts {
		var opErr *net.OpError
		if !errors.As(a, &opErr) || (dial != nil && opErr.Error() != dial.Error()) {
			return fmt.Errorf("database unreachable: %w", err)
		}
		dial = opErr
	}
	return fmt.Errorf("database unreachable (%s): %w", who, dial)
}

// Unreachable is ConnectError for an error of connecting, which says
// "database unreachable" even when pgconn did not return a ConnectError.
func Unreachable(err error) error {
	if e := ConnectError(err); e != err {
		return e
	}
	return fmt.Errorf("database unreachable: %w", err)
}
