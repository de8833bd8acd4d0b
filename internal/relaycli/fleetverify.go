package relaycli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"
)

// verifyFleet is relay verify --config: every source of the fleet file (or
// --source) verified over the same window, one after the other, each
// report under its name; the gauges of all of them, labelled source, go
// to --metrics-file, --pushgateway (one group per source) and, with
// --every, --metrics-addr. It exits 1 naming each source whose window is
// not clean.
func verifyFleet(c *cli.Context, sc *scrubber) error {
	logger, sources, err := fleetCommand(c, sc)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	var runs []*verifyRun
	for _, s := range sources {
		cfg := *s.Config
		cfg.Logger = logger.With("source", s.Name)
		v, err := newVerifyRun(c, sc, &cfg, s.Name)
		if err != nil {
			return err
		}
		prometheus.WrapRegistererWith(prometheus.Labels{"source": s.Name}, reg).MustRegister(v.metrics)
		runs = append(runs, v)
	}
	setVerifyMemoryLimit(c, logger) // the sources are verified one at a time
	all := func() error {
		var bad []string
		for i, v := range runs {
			if i > 0 && !c.Bool(flagJSON) {
				fmt.Fprintln(c.App.Writer)
			}
			if err := v.once(c, v.metrics, reg); err != nil {
				if exitCode(err) == ExitUsage {
					return err
				}
				bad = append(bad, v.source+" ("+err.Error()+")")
			}
		}
		if len(bad) > 0 {
			return fail(errors.New("sources not clean: " + strings.Join(bad, "; ")))
		}
		return nil
	}
	first := runs[0]
	if first.every == 0 {
		return all()
	}
	return verifyEvery(c, first.every, reg, logger, func(now time.Time) error {
		for _, v := range runs {
			v.opts.From, v.opts.To = now.Add(-v.since), now
		}
		return all()
	})
}
