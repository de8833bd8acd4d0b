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

// StartIn is not supported on this system.
func StartIn(ctx context.Context, bin string, settings ...string) (*Server, error) {
	return Start(ctx, settings...)
}

// InitTemplate is not supported on this system.
func InitTemplate(ctx context.Context, bin, dir string) error {
	_, err := Start(ctx)
	return err
}

// TemplateData is the data directory InitTemplate would write into dir.
func TemplateData(dir string) string { return dir + "/data" }

// StartFromTemplate is not supported on this system.
func StartFromTemplate(ctx context.Context, bin, template string, settings ...string) (*Server, error) {
	return Start(ctx, settings...)
}

// StartPrivate is not supported on this system.
func StartPrivate(ctx context.Context, settings ...string) (*Server, error) {
	return Start(ctx, settings...)
}

// proc is unused here.
type proc struct{}

// Stop does nothing here: Start never succeeds.
func (s *Server) Stop() {}

// Kill does nothing here: Start never succeeds.
func (s *Server) Kill() {}

// Restart is not supported on this system.
func (s *Server) Restart(context.Context, bool) error {
	return errors.New("pgserver: not supported on this system")
}

// CopyData is not supported on this system.
func (s *Server) CopyData(context.Context) (string, error) {
	return "", errors.New("pgserver: not supported on this system")
}

// RestoreData is not supported on this system.
func (s *Server) RestoreData(context.Context, string) error {
	return errors.New("pgserver: not supported on this system")
}

// StartCopy is not supported on this system.
func (s *Server) StartCopy(context.Context, string) (*Server, error) {
	return nil, errors.New("pgserver: not supported on this system")
}

// StartStandby is not supported on this system.
func (s *Server) StartStandby(context.Context) (*Server, error) {
	return nil, errors.New("pgserver: not supported on this system")
}

// Promote is not supported on this system.
func (s *Server) Promote(context.Context) error {
	return errors.New("pgserver: not supported on this system")
}

// Port is 0 here.
func (s *Server) Port() int { return 0 }
