package inboxcli

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// stringFlag is a string flag, read from its INBOX_* variable too.
func stringFlag(name, def, usage string) cli.Flag {
	return &cli.StringFlag{Name: name, EnvVars: []string{envName(name)}, Value: def, Usage: usage}
}

// boolFlag is a boolean flag, read from its INBOX_* variable too.
func boolFlag(name, usage string) cli.Flag {
	return &cli.BoolFlag{Name: name, EnvVars: []string{envName(name)}, Usage: usage}
}

// intFlag is an integer flag, read from its INBOX_* variable too.
func intFlag(name string, def int, usage string) cli.Flag {
	return &cli.IntFlag{Name: name, EnvVars: []string{envName(name)}, Value: def, Usage: usage}
}

func consumerFlag(usage string) cli.Flag { return stringFlag("consumer", "", usage) }

func jsonFlag() cli.Flag { return boolFlag("json", "print JSON instead of a table") }

// withStore runs fn with the Store of --table on a pool.
func withStore(c *cli.Context, fn func(*cli.Context, *inbox.Store) error) error {
	if _, err := pgname.Parse(c.String("table"), "public"); err != nil {
		return usageError{Err: fmt.Errorf("inbox: %w", err)} // before connecting
	}
	pool, err := connect(c)
	if err != nil {
		return err
	}
	defer pool.Close()
	store, err := inbox.NewStore(inbox.Pgx(pool), c.String("table"))
	if err != nil {
		return usageError{Err: err}
	}
	return fn(c, store)
}

func migrateCommand() *cli.Command {
	return cliutil.WithHelp(helpFiles, &cli.Command{
		Name: "migrate",
		Action: func(c *cli.Context) error {
			pool, err := connect(c)
			if err != nil {
				return err
			}
			defer pool.Close()
			applied, err := inbox.Migrate(c.Context, inbox.Pgx(pool), c.String("table"))
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Fprintf(c.App.Writer, "%s is up to date\n", c.String("table"))
				return nil
			}
			fmt.Fprintf(c.App.Writer, "%s: applied migrations %v\n", c.String("table"), applied)
			return nil
		},
	})
}

func statusCommand() *cli.Command {
	return cliutil.WithHelp(helpFiles, &cli.Command{
		Name:  "status",
		Flags: []cli.Flag{consumerFlag("only this consumer (default: all)"), jsonFlag()},
		Action: func(c *cli.Context) error {
			return withStore(c, func(c *cli.Context, s *inbox.Store) error {
				counts, err := s.Counts(c.Context, c.String("consumer"))
				if err != nil {
					return err
				}
				return writeTable(c, counts, "CONSUMER\tSTATUS\tCOUNT\tSTUCK\tOLDEST", func(tw io.Writer) {
					for _, r := range counts {
						fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", cliutil.Quote(r.Consumer), r.Status, r.Count, r.Stuck, r.Oldest.UTC().Format(time.RFC3339))
					}
				})
			})
		},
	})
}

func purgeCommand() *cli.Command {
	return cliutil.WithHelp(helpFiles, &cli.Command{
		Name: "purge",
		Flags: []cli.Flag{
			stringFlag("older-than", "", "retention: a Go duration (72h) or days (30d)"),
			stringFlag("status", "COMPLETED", "status to purge: COMPLETED or FAILED_FINAL"),
			consumerFlag("only this consumer (default: all)"),
			intFlag("batch-size", 1000, "rows per DELETE"),
		},
		Action: func(c *cli.Context) error {
			if c.String("older-than") == "" {
				return usagef("purge: --older-than is required")
			}
			age, err := parseAge(c.String("older-than"))
			if err != nil {
				return usagef("--older-than: %v", err)
			}
			st, err := inbox.ParseStatus(c.String("status"))
			if err != nil || (st != inbox.StatusCompleted && st != inbox.StatusFailedFinal) {
				return usagef("--status %q: want COMPLETED or FAILED_FINAL", c.String("status"))
			}
			return withStore(c, func(c *cli.Context, s *inbox.Store) error {
				n, err := s.Purge(c.Context, inbox.PurgeParams{Consumer: c.String("consumer"), OlderThan: age,
					Status: st, BatchSize: c.Int("batch-size")})
				if err != nil {
					return err
				}
				if n == 0 {
					fmt.Fprintf(c.App.Writer, "purged nothing: no %s rows older than %s\n", st, c.String("older-than"))
					return nil
				}
				fmt.Fprintf(c.App.Writer, "purged %d %s rows older than %s\n", n, st, c.String("older-than"))
				return nil
			})
		},
	})
}

func listCommand() *cli.Command {
	return cliutil.WithHelp(helpFiles, &cli.Command{
		Name: "list",
		Flags: []cli.Flag{
			stringFlag("status", "", "only this status: RECEIVED, PROCESSING, COMPLETED, FAILED_RETRYABLE, FAILED_FINAL"),
			consumerFlag("only this consumer (default: all)"),
			intFlag("limit", 100, "at most this many rows"),
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			var st inbox.Status
			if s := c.String("status"); s != "" {
				var err error
				if st, err = inbox.ParseStatus(s); err != nil {
					return usagef("--status %q: want one of %s", s, statusList())
				}
			}
			return withStore(c, func(c *cli.Context, s *inbox.Store) error {
				recs, err := s.List(c.Context, inbox.ListParams{Consumer: c.String("consumer"), Status: st, Limit: c.Int("limit")})
				if err != nil {
					return err
				}
				return writeTable(c, recs, "CONSUMER\tMESSAGE_ID\tBUSINESS_KEY\tSTATUS\tATTEMPTS\tSOURCE\tRECEIVED\tREQUEST_REF\tLAST_ERROR", func(tw io.Writer) {
					for _, r := range recs {
						// Every text but the status and the times came from
						// Kafka, a handler or an external API: quoted.
						src := "-"
						if r.Topic != "" {
							src = fmt.Sprintf("%s/%d@%d", cliutil.Quote(r.Topic), r.Partition, r.Offset)
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", cliutil.Quote(r.Consumer), cliutil.Quote(r.MessageID),
							cliutil.Quote(r.BusinessKey), r.Status, r.Attempts, src, r.ReceivedAt.UTC().Format(time.RFC3339),
							orDash(r.RequestRef), orDash(r.LastError))
					}
				})
			})
		},
	})
}

func reviveCommand() *cli.Command {
	return cliutil.WithHelp(helpFiles, &cli.Command{
		Name:      "revive",
		ArgsUsage: "MESSAGE_ID...",
		Flags: []cli.Flag{
			consumerFlag("consumer of the messages (required)"),
			boolFlag("all", "revive every FAILED_FINAL message of the consumer"),
		},
		Action: func(c *cli.Context) error {
			consumer := c.String("consumer")
			if consumer == "" {
				return usagef("revive: --consumer is required")
			}
			ids := c.Args().Slice()
			if len(ids) == 0 && !c.Bool("all") {
				return usagef("revive: give message IDs or --all")
			}
			if len(ids) > 0 && c.Bool("all") {
				return usagef("revive: give message IDs or --all, not both")
			}
			return withStore(c, func(c *cli.Context, s *inbox.Store) error {
				n, err := s.Revive(c.Context, inbox.ReviveParams{Consumer: consumer, MessageIDs: ids})
				if err != nil {
					return err
				}
				return reviveResult(c, consumer, ids, n)
			})
		},
	})
}

// writeTable prints v as JSON with --json, else a table: header, then the
// tab-separated lines rows writes. A nil slice prints as [] (no rows), not
// null.
func writeTable(c *cli.Context, v any, header string, rows func(tw io.Writer)) error {
	if c.Bool("json") {
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice && rv.IsNil() {
			v = reflect.MakeSlice(rv.Type(), 0, 0).Interface()
		}
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	rows(tw)
	return tw.Flush()
}

// reviveResult reports what revive changed. An explicit message ID that was
// not a FAILED_FINAL message of the consumer is an error (exit 1): a typo
// must not look like success.
func reviveResult(c *cli.Context, consumer string, ids []string, n int64) error {
	w := c.App.Writer
	if len(ids) == 0 {
		if n == 0 {
			fmt.Fprintf(w, "revived nothing: %s has no FAILED_FINAL messages\n", consumer)
			return nil
		}
		fmt.Fprintf(w, "revived %d messages of %s\n", n, consumer)
		return nil
	}
	want := int64(len(distinct(ids)))
	if n == want {
		fmt.Fprintf(w, "revived %d messages of %s\n", n, consumer)
		return nil
	}
	if n > 0 {
		fmt.Fprintf(w, "revived %d messages of %s\n", n, consumer)
	}
	return fmt.Errorf("revive: %d of the %d given message IDs are not FAILED_FINAL messages of consumer %q (see inbox list --consumer %s --status FAILED_FINAL)",
		want-n, want, consumer, consumer)
}

func distinct(ids []string) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}
