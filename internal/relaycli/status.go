package relaycli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/kafkaflags"
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
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				if err := enc.Encode(st); err != nil {
					return fail(err)
				}
			} else if err := printStatus(c.App.Writer, st); err != nil {
				return fail(err)
			}
			err = unhealthy(st)
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

// unhealthy returns the status's problems as one error, or nil.
func unhealthy(st *relaytype.SlotStatus) error {
	if len(st.Problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(st.Problems, "; "))
}

func printStatus(w io.Writer, st *relaytype.SlotStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	if st.ForeignSlot != "" {
		row("slot", st.Slot+" (not this database's: "+st.ForeignSlot+")")
	} else {
		row("slot", st.Slot+" ("+existence(st.SlotExists)+")")
	}
	row("publication", st.Publication+" ("+existence(st.PublicationExists)+")")
	row("table", st.Table)
	if st.SlotExists {
		active := "no"
		if st.Active {
			active = "yes"
			if st.ActivePID != nil {
				active += ", pid " + strconv.Itoa(int(*st.ActivePID))
			}
		}
		row("active", active)
		if st.Active {
			row("active_process", activeProcess(st))
		}
		row("confirmed_flush_lsn", st.ConfirmedFlushLSN)
		row("restart_lsn", st.RestartLSN)
		row("current_wal_lsn", st.CurrentWALLSN)
		row("lag", cliutil.ByteCount(st.LagBytes))
		row("retained_wal", cliutil.ByteCount(st.RetainedWALBytes))
		row("wal_status", st.WALStatus)
		safe := "unlimited"
		if st.SafeWALSize != nil {
			safe = cliutil.ByteCount(*st.SafeWALSize)
		}
		row("safe_wal_size", safe)
	}
	if s := st.State; s != nil {
		row("state", fmt.Sprintf("system %s, timeline %d, slot created at %s (%s), incarnation %s", s.SystemIdentifier, s.Timeline,
			s.SlotCreatedLSN, s.SlotCreatedAt.UTC().Format(time.RFC3339), cmp.Or(s.Incarnation, "none yet")))
		confirmed := s.ConfirmedLSN
		if s.ConfirmedCommitTime != nil {
			confirmed += ", committed " + s.ConfirmedCommitTime.UTC().Format(time.RFC3339)
		}
		row("state_confirmed", confirmed)
		row("state_ceiling_lsn", s.CeilingLSN)
		if s.PrunedBefore != nil {
			row("pruned_before", s.PrunedBefore.UTC().Format(time.RFC3339))
		}
	}
	if p := st.Progress; p != nil {
		switch {
		case p.Error != "":
			row("progress", "unknown ("+p.Error+")")
		case !p.Found:
			row("progress", "none committed yet (topic "+p.Topic+", key "+p.Key+")")
		default:
			v := p.CommittedLSN
			if p.CommitTime != nil {
				v += ", committed " + p.CommitTime.UTC().Format(time.RFC3339)
			}
			row("progress", v+" (topic "+p.Topic+", key "+p.Key+")")
			row("progress_trust", p.Trust)
		}
	}
	for _, o := range st.OtherSlots {
		row("other_slot", o+": it publishes every outbox row too")
	}
	if st.Gap != nil {
		row("gap", st.Gap.Reason+": "+st.Gap.Detail)
	}
	for _, p := range st.Problems {
		row("problem", p)
	}
	return tw.Flush()
}

// activeProcess describes the process streaming the slot, from
// pg_stat_replication.
func activeProcess(st *relaytype.SlotStatus) string {
	p := st.ActiveApplicationName
	if p == "" {
		p = "(no application_name)"
	}
	if st.ActiveClientAddr != "" {
		p += " from " + st.ActiveClientAddr
	} else {
		p += " over a Unix socket"
	}
	if st.ActiveState != "" {
		p += ", " + st.ActiveState
	}
	if st.ActiveBackendStart != nil {
		p += ", connected " + st.ActiveBackendStart.UTC().Format(time.RFC3339)
	}
	if st.ActiveReplyTime != nil {
		p += ", last reply " + st.ActiveReplyTime.UTC().Format(time.RFC3339)
	}
	return p
}

func existence(ok bool) string {
	if ok {
		return "exists"
	}
	return "missing"
}
