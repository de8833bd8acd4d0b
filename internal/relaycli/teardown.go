package relaycli

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

const flagYes = "yes"

func teardownCommand(sc *scrubber) *cli.Command {
	return &cli.Command{
		Name:  "teardown",
		Usage: "drop the slot and the publication (needs --yes)",
		Description: "teardown drops the replication slot and the publication; the outbox table and its rows stay.\n" +
			"The slot's position is lost: rows committed before the next setup are never published. An\n" +
			"active slot (a relay still running) is an error. Pass --yes to confirm.",
		Flags: append(databaseFlags(), &cli.BoolFlag{Name: flagYes, EnvVars: envVar(flagYes), Usage: "confirm dropping the slot and the publication"}),
		Action: adminAction(sc, func(ctx context.Context, c *cli.Context, cfg *relay.Config) error {
			if !c.Bool(flagYes) {
				return usagef("teardown drops slot %q and publication %q and loses the slot's position; pass --%s to confirm", cfg.Slot, cfg.Publication, flagYes)
			}
			before, err := readObjects(ctx, cfg)
			if err != nil {
				return fail(err)
			}
			if err := relay.Teardown(ctx, cfg); err != nil {
				return fail(err)
			}
			w := c.App.Writer
			fmt.Fprintf(w, "slot %s: %s\n", cfg.Slot, droppedOrMissing(before.Slot))
			fmt.Fprintf(w, "publication %s: %s\n", cfg.Publication, droppedOrMissing(before.Publication))
			fmt.Fprintf(w, "table %s: kept\n", cfg.Table)
			return nil
		}),
	}
}

func droppedOrMissing(existed bool) string {
	if existed {
		return "dropped"
	}
	return "did not exist"
}
