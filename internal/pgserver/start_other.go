//go:build !unix

package pgserver

import (
	"context"
	"errors"
)

// Start is not supported on this system.
func Start(ctx context.Context, settings ...string) (*Server, error) {
	return nil, errors.New("pgserver: starting a throwaway PostgreSQL server needs Linux or macOS; use an existing server")
}

// Stop does nothing here: Start never succeeds.
func (s *Server) Stop() {}
