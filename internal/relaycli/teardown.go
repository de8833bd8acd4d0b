package relaycli

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/preflight"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

const (
	flagYes      = "yes"
	flagSlotOnly = "slot-only"
)

func teardownCommand(sc *scrubber) *cli.Command {
	return cliutil.WithHelp(helpFiles, &cli.Command{
		Name: "teardown",
		Flags: append(databaseFlags(),
			&cli.BoolFlag{Name: flagYes, EnvVars: envVar(flagYes), Usage: "confirm dropping the slot and the publication"},
			&cli.BoolFlag{Name: flagSlotOnly, EnvVars: envVar(flagSlotOnly), Usage: "drop the slot and its state row only, keep the publication"}),
		Action: adminAction(sc, func(ctx context.Context, c *cli.Context, cfg *relay.Config) error {
			slotOnly := c.Bool(flagSlotOnly)
			if !c.Bool(flagYes) {
				if slotOnly {
					return usagef("teardown drops slot %q and loses its position; pass --%s to confirm", cfg.Slot, flagYes)
				}
				return usagef("teardown drops slot %q and publication %q and loses the slot's position; pass --%s to confirm", cfg.Slot, cfg.Publication, flagYes)
			}
			before, err := preflight.ReadObjects(ctx, cfg)
			if err != nil {
				return fail(err)
			}
			drop := relay.Teardown
			if slotOnly {
				drop = relay.TeardownSlot
			}
			if err := drop(ctx, cfg); err != nil {
				return fail(err)
			}
			w := c.App.Writer
			fmt.Fprintf(w, "slot %s: %s\n", cfg.Slot, droppedOrMissing(before.Slot))
			if slotOnly {
				fmt.Fprintf(w, "publication %s: kept\n", cfg.Publication)
			} else {
				fmt.Fprintf(w, "publication %s: %s\n", cfg.Publication, droppedOrMissing(before.Publication))
			}
			fmt.Fprintf(w, "table %s: kept\n", cfg.Table)
			return nil
		}),
	})
}

func droppedOrMissing(existed bool) string {
	if existed {
		return "dropped"
	}
	return "did not exist"
}
