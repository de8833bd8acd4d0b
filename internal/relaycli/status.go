package relaycli

import (
	"context"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/kafkaflags"
	"github.com/pgoutbox/pgoutbox/internal/report"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

const flagJSON = "json"

func statusCommand(sc *scrubber) *cli.Command {
	return cliutil.WithHelp(helpFiles, &cli.Command{
		Name: "status",
		Flags: append(append(append(databaseFlags(), &cli.BoolFlag{Name: flagJSON, EnvVars: envVar(flagJSON), Usage: "print JSON instead of a table"}),
			append(exactlyOnceFlags(), brokersFlag("--exactly-once: Kafka bootstrap brokers, host:port, comma separated"))...),
			append(kafkaflags.Flags(envName, catKafka), fleetFileFlags("show every source it lists, each under its name; exit 1 naming the unhealthy ones")...)...),
		Action: fleetOr(sc, statusFleet, adminAction(sc, func(ctx context.Context, c *cli.Context, cfg *relay.Config) error {
			if err := statusKafkaConfig(c, sc, cfg); err != nil {
				return err
			}
			st, err := relay.Status(ctx, cfg)
			if err != nil {
				return fail(err)
			}
			if c.Bool(flagJSON) {
				if err := report.JSON(c.App.Writer, st); err != nil {
					return fail(err)
				}
			} else if err := report.Status(c.App.Writer, st); err != nil {
				return fail(err)
			}
			err = report.Unhealthy(st)
			if err != nil && (!st.SlotExists || !st.PublicationExists) {
				// Say why setup could not create them either.
				var pe *relaytype.PrerequisitesError
				if perr := relay.CheckPrerequisites(ctx, cfg); errors.As(perr, &pe) {
					err = fmt.Errorf("%w; and relay setup cannot create them: %w", err, perr)
				}
			}
			return fail(err)
		})),
	})
}

// fleetOr runs fleet when --config names a fleet file, else single.
func fleetOr(sc *scrubber, fleet func(*cli.Context, *scrubber) error, single cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.String(flagConfig) != "" {
			return fleet(c, sc)
		}
		if c.IsSet(flagSource) {
			return usagef("--%s picks a source of the fleet file: it needs --%s", flagSource, flagConfig)
		}
		return single(c)
	}
}

// statusKafkaConfig reads, with --exactly-once, what relay status needs
// to read the committed progress from Kafka into cfg.
func statusKafkaConfig(c *cli.Context, sc *scrubber, cfg *relay.Config) error {
	if err := exactlyOnceConfig(c, cfg); err != nil || !cfg.ExactlyOnce {
		return err
	}
	var err error
	if cfg.Kafka.Brokers, err = brokers(c.StringSlice(flagBrokers)); err != nil {
		return err
	}
	return kafkaSecurity(c, sc, cfg)
}
