package relaycli

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// adminTimeout bounds setup, status and teardown.
const adminTimeout = time.Minute

func setupCommand(sc *scrubber) *cli.Command {
	return &cli.Command{
		Name:  "setup",
		Usage: "create the outbox table, the publication and the slot (idempotent)",
		Description: "setup creates what is missing: the outbox table (--table), the publication (--publication,\n" +
			"FOR TABLE the outbox WITH (publish = 'insert')) and the logical replication slot (--slot,\n" +
			"pgoutput). Existing objects are left as they are, so it is safe to run on every deploy.\n" +
			"Rows committed after the slot exists are published by relay run; it prints what it created\n" +
			"and what it found.",
		Flags: databaseFlags(),
		Action: adminAction(sc, func(ctx context.Context, c *cli.Context, cfg *relay.Config) error {
			if cfg.Table != relay.DefaultTable && (cfg.Slot == relay.DefaultSlot || cfg.Publication == relay.DefaultPublication) {
				fmt.Fprintf(c.App.ErrWriter, "relay: note: --%s %s with the default --%s %s and --%s %s; give each outbox its own slot and publication, and pass the same three flags to relay run\n",
					flagTable, cfg.Table, flagSlot, cfg.Slot, flagPublication, cfg.Publication)
			}
			before, err := readObjects(ctx, cfg)
			if err != nil {
				return fail(err)
			}
			if err := relay.Setup(ctx, cfg); err != nil {
				return fail(err)
			}
			st, err := relay.Status(ctx, cfg)
			if err != nil {
				return fail(err)
			}
			w := c.App.Writer
			fmt.Fprintf(w, "table %s: %s\n", cfg.Table, createdOrFound(before.Table))
			fmt.Fprintf(w, "publication %s: %s\n", cfg.Publication, createdOrFound(before.Publication))
			fmt.Fprintf(w, "slot %s: %s (confirmed_flush_lsn %s)\n", cfg.Slot, createdOrFound(before.Slot), st.ConfirmedFlushLSN)
			return nil
		}),
	}
}

func createdOrFound(existed bool) string {
	if existed {
		return "exists"
	}
	return "created"
}

// adminAction is the action of an admin command (setup, status,
// teardown): no positional arguments, the database flags, and fn under a
// context bounded by adminTimeout.
func adminAction(sc *scrubber, fn func(ctx context.Context, c *cli.Context, cfg *relay.Config) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		if err := noArgs(c); err != nil {
			return err
		}
		cfg, err := databaseConfig(c, sc)
		if err != nil {
			return err
		}
		warnSecretFlags(c, cfg.Logger)
		ctx, cancel := context.WithTimeout(c.Context, adminTimeout)
		defer cancel()
		return fn(ctx, c, cfg)
	}
}
