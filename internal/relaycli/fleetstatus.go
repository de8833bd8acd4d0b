package relaycli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

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

// sourceReport is one source in relay status --config.
type sourceReport struct {
	Name   string                `json:"name"`
	Status *relaytype.SlotStatus `json:"status,omitempty"`
	Error  string                `json:"error,omitempty"`
}

// fleetCommand is the prologue of a command run across a fleet file (relay
// setup, status, verify): no arguments, no per-source flag beside
// --config, the logger, and the file, validated: its sources, or with
// --source the one of that name.
func fleetCommand(c *cli.Context, sc *scrubber) (*slog.Logger, []fleetSource, error) {
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
func pickSources(c *cli.Context, fc *fleetConfig) ([]fleetSource, error) {
	want := c.String(flagSource)
	if want == "" {
		return fc.Sources, nil
	}
	for _, s := range fc.Sources {
		if s.Name == want {
			return []fleetSource{s}, nil
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
	reports := make([]sourceReport, len(sources))
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

	if c.Bool(flagJSON) {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Sources []sourceReport `json:"sources"`
		}{reports}); err != nil {
			return fail(err)
		}
	}
	var bad []string
	for i, r := range reports {
		if !c.Bool(flagJSON) {
			if i > 0 {
				fmt.Fprintln(c.App.Writer)
			}
			fmt.Fprintf(c.App.Writer, "source %s\n", r.Name)
		}
		switch {
		case r.Error != "":
			bad = append(bad, r.Name+" ("+r.Error+")")
			if !c.Bool(flagJSON) {
				fmt.Fprintf(c.App.Writer, "error  %s\n", r.Error)
			}
		default:
			if !c.Bool(flagJSON) {
				if err := printStatus(c.App.Writer, r.Status); err != nil {
					return fail(err)
				}
			}
			if err := unhealthy(r.Status); err != nil {
				bad = append(bad, r.Name+" ("+err.Error()+")")
			}
		}
	}
	if len(bad) > 0 {
		return fail(errors.New("unhealthy sources: " + strings.Join(bad, "; ")))
	}
	return nil
}
