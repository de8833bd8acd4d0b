package relaycli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/fleet"
	"github.com/pgoutbox/pgoutbox/internal/preflight"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// adminTimeout bounds setup, status and teardown (setup: after --wait).
const adminTimeout = time.Minute

const flagWait = "wait"

// waitForDatabase retries connecting for up to wait while the server is
// unreachable or starting up (SQLSTATE 57P03); any other answer from the
// server (bad password, missing database) ends the wait at once.
func waitForDatabase(ctx context.Context, c *cli.Context, sc *scrubber, url string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	said := false
	for {
		err := preflight.PingDatabase(ctx, url)
		var pgErr *pgconn.PgError
		if err == nil || time.Now().After(deadline) || (errors.As(err, &pgErr) && pgErr.Code != "57P03") {
			return err
		}
		if !said {
			fmt.Fprintf(c.App.ErrWriter, "relay: waiting up to %s for the database: %s\n", wait, cliutil.Line("relay", sc.String(err.Error())))
			said = true
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

func setupCommand(sc *scrubber) *cli.Command {
	return cliutil.WithHelp(helpFiles, &cli.Command{
		Name: "setup",
		Flags: append(append(databaseFlags(), durationFlag(flagWait, catDatabase, 0,
			"retry connecting for up to this long while the database is unreachable or starting up (containers); 0 tries once")),
			fleetFileFlags("set up every source it lists (its table, publication and slot), one after the other; exit 1 naming the sources that failed")...),
		Action: fleetOr(sc, setupFleet, adminAction(sc, func(ctx context.Context, c *cli.Context, cfg *relay.Config) error {
			if note := defaultNamesNote(c, cfg); note != "" {
				fmt.Fprintln(c.App.ErrWriter, note)
			}
			_, err := setupOne(ctx, c, sc, cfg)
			return fail(err)
		})),
	})
}

// setupOne is relay setup of cfg: after waiting for the database, the
// table, the publication and the slot, each said created or found. It
// returns the slot's status after.
func setupOne(ctx context.Context, c *cli.Context, sc *scrubber, cfg *relay.Config) (*relaytype.SlotStatus, error) {
	if err := waitForDatabase(ctx, c, sc, cfg.DatabaseURL, c.Duration(flagWait)); err != nil {
		return nil, err
	}
	before, err := preflight.ReadObjects(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := relay.Setup(ctx, cfg); err != nil {
		return nil, err
	}
	st, err := relay.Status(ctx, cfg)
	if err != nil {
		return nil, err
	}
	w := c.App.Writer
	fmt.Fprintf(w, "table %s: %s\n", cfg.Table, createdOrFound(before.Table))
	fmt.Fprintf(w, "publication %s: %s\n", cfg.Publication, createdOrFound(before.Publication))
	fmt.Fprintf(w, "slot %s: %s (confirmed_flush_lsn %s)\n", cfg.Slot, createdOrFound(before.Slot), st.ConfirmedFlushLSN)
	return st, nil
}

// setupFleet is relay setup --config: every source of the file (or
// --source), one after the other, each under its name; a source that
// fails does not stop the others, and the command exits 1 naming them.
func setupFleet(c *cli.Context, sc *scrubber) error {
	logger, sources, err := fleetCommand(c, sc)
	if err != nil {
		return err
	}
	var bad []string
	statuses := make([]*relaytype.SlotStatus, len(sources))
	for i, s := range sources {
		if i > 0 {
			fmt.Fprintln(c.App.Writer)
		}
		fmt.Fprintf(c.App.Writer, "source %s\n", s.Name)
		cfg := *s.Config
		cfg.Logger = logger.With("source", s.Name)
		ctx, cancel := context.WithTimeout(c.Context, adminTimeout+c.Duration(flagWait))
		st, err := setupOne(ctx, c, sc, &cfg)
		cancel()
		statuses[i] = st
		if err != nil {
			msg := sc.String(err.Error())
			fmt.Fprintf(c.App.Writer, "error  %s\n", msg)
			bad = append(bad, s.Name+" ("+msg+")")
		}
	}
	// Two names of one server pass the file's check: the system
	// identifier tells them apart.
	bad = append(bad, fleet.SameServerSlots(sources, statuses)...)
	if len(bad) > 0 {
		return fail(errors.New("sources not set up: " + strings.Join(bad, "; ")))
	}
	return nil
}

// defaultNamesNote warns when a table other than the default takes the
// default slot or publication name without the flag (or its variable)
// being given: a second outbox set up that way would share them. Names
// given explicitly are the user's choice, even when they equal a default.
func defaultNamesNote(c *cli.Context, cfg *relay.Config) string {
	if cfg.Table == relay.DefaultTable {
		return ""
	}
	var defaulted []string
	if !c.IsSet(flagSlot) && cfg.Slot == relay.DefaultSlot {
		defaulted = append(defaulted, "--"+flagSlot+" "+cfg.Slot)
	}
	if !c.IsSet(flagPublication) && cfg.Publication == relay.DefaultPublication {
		defaulted = append(defaulted, "--"+flagPublication+" "+cfg.Publication)
	}
	if len(defaulted) == 0 {
		return ""
	}
	return fmt.Sprintf("relay: note: --%s %s with the default %s; give each outbox its own slot and publication, and pass the same three flags to relay run",
		flagTable, cfg.Table, strings.Join(defaulted, " and "))
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
		warnSecretFlags(sc, cfg.Logger)
		ctx, cancel := context.WithTimeout(c.Context, adminTimeout+c.Duration(flagWait))
		defer cancel()
		return fn(ctx, c, cfg)
	}
}
