package relaycli

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/fleet"
	"github.com/pgoutbox/pgoutbox/internal/report"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// flagSource picks one source of the fleet file.
const flagSource = "source"

// fleetFileFlags are the flags of a command that works across a fleet
// file's sources (relay status, relay verify); what says what it does
// with them.
func fleetFileFlags(what string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagConfig, Category: catOps, EnvVars: envVar(flagConfig),
			Usage: "fleet file (see relay run --config): " + what},
		stringFlag(flagSource, catOps, "", "with --config: only this source"),
	}
}

// fleetCommand is the prologue of a command run across a fleet file (relay
// setup, status, verify): no arguments, no per-source flag beside
// --config, the logger, and the file, validated: its sources, or with
// --source the one of that name.
func fleetCommand(c *cli.Context, sc *scrubber) (*slog.Logger, []fleet.Source, error) {
	if err := noArgs(c); err != nil {
		return nil, nil, err
	}
	if err := fleetConflicts(c); err != nil {
		return nil, nil, err
	}
	logger, err := newLogger(c.App.ErrWriter, c.String(flagLogLevel), c.String(flagLogFormat), sc)
	if err != nil {
		return nil, nil, err
	}
	fc, err := loadFleet(c.String(flagConfig), sc)
	if err != nil {
		return nil, nil, err
	}
	sources, err := pickSources(c, fc)
	if err != nil {
		return nil, nil, err
	}
	return logger, sources, nil
}

// pickSources is the file's sources, or with --source the one of that
// name (a usage error when the file has none).
func pickSources(c *cli.Context, fc *fleet.File) ([]fleet.Source, error) {
	want := c.String(flagSource)
	if want == "" {
		return fc.Sources, nil
	}
	for _, s := range fc.Sources {
		if s.Name == want {
			return []fleet.Source{s}, nil
		}
	}
	return nil, usagef("--%s: the fleet file has no source %q", flagSource, want)
}

// statusFleet is relay status --config: the status of every source of the
// file (or of --source), read concurrently.
func statusFleet(c *cli.Context, sc *scrubber) error {
	logger, sources, err := fleetCommand(c, sc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, adminTimeout)
	defer cancel()
	reports := make([]report.Source, len(sources))
	var wg sync.WaitGroup
	for i, s := range sources {
		cfg := *s.Config
		cfg.Logger = logger.With("source", s.Name)
		wg.Go(func() {
			reports[i].Name = s.Name
			st, err := relay.Status(ctx, &cfg)
			if err != nil {
				reports[i].Error = sc.String(err.Error())
				return
			}
			reports[i].Status = st
		})
	}
	wg.Wait()
	statuses := make([]*relaytype.SlotStatus, len(reports))
	for i, r := range reports {
		statuses[i] = r.Status
	}
	fleet.SameServerSlots(sources, statuses)

	bad, err := report.Sources(c.App.Writer, c.Bool(flagJSON), reports)
	if err != nil {
		return fail(err)
	}
	if len(bad) > 0 {
		return fail(errors.New("unhealthy sources: " + strings.Join(bad, "; ")))
	}
	return nil
}
