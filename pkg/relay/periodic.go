package relay

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
)

// periodic runs job every interval on a regular connection it keeps open
// (and re-opens after a failure) until ctx ends; at once first when now is
// set. Jobs are skipped while skip reports true. Failures are logged once,
// as what failed, until the job succeeds again.
type periodic struct {
	cfg      *Config
	what     string // "reading the slot's lag", "heartbeat"
	interval time.Duration
	now      bool
	skip     func() bool
	job      func(ctx context.Context, conn *pgx.Conn) error
}

func (p *periodic) run(ctx context.Context) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.WithoutCancel(ctx))
		}
	}()
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	failing, first := false, p.now
	for {
		if !first {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
		first = false
		if p.skip != nil && p.skip() {
			continue
		}
		err := p.once(ctx, &conn)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			p.cfg.Logger.Warn(p.what+" failed; retrying at every interval", "error", err, "interval", p.interval)
			failing = true
		case err == nil && failing:
			p.cfg.Logger.Info(p.what + " works again")
			failing = false
		}
		if err != nil && conn != nil {
			conn.Close(context.WithoutCancel(ctx))
			conn = nil
		}
	}
}

func (p *periodic) once(ctx context.Context, conn **pgx.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, max(p.interval, 5*time.Second))
	defer cancel()
	if *conn == nil {
		c, err := pgconnect.Connect(ctx, p.cfg.DatabaseURL)
		if err != nil {
			return err
		}
		*conn = c
	}
	return p.job(ctx, *conn)
}
