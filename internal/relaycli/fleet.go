package relaycli

import (
	"io"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/fleet"
	"github.com/pgoutbox/pgoutbox/internal/kafkaflags"
	"github.com/pgoutbox/pgoutbox/internal/memlimit"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// flagConfig is relay run's flag naming the fleet file.
const flagConfig = "config"

// processFlags are relay run's flags that belong to the process, not to a
// source: with --config they stay on the command line (or in the
// environment) and may not appear in the file.
var processFlags = []string{flagMetricsAddr, flagLogLevel, flagLogFormat, flagConfig, flagInstanceID, flagTracing}

// secretFlags are the per-source flags whose value a fleet file may also
// give as KEY-file: the path of a file holding it, as RELAY_KEY_FILE does
// for a single source.
var secretFlags = []string{flagDatabaseURL, kafkaflags.FlagSASLPassword, flagSinkURL}

// sourceFlags are the flags a source of a fleet file is parsed with:
// relay run's, without --metrics-addr and without their environment
// variables (with --config the file alone configures a source). The log
// flags stay, at their defaults: the process's logger replaces the one
// they build. Built afresh per call: urfave/cli stores parsed values in
// them.
func sourceFlags() []cli.Flag {
	all := append(append(databaseFlags(), runFlags()...), gapFlags()...)
	all = slices.DeleteFunc(all, func(f cli.Flag) bool { return f.Names()[0] == flagMetricsAddr })
	for _, f := range all {
		if env := reflect.ValueOf(f).Elem().FieldByName("EnvVars"); env.IsValid() {
			env.Set(reflect.Zero(env.Type()))
		}
	}
	return all
}

// sourceKeys are the keys a source (or the defaults) of a fleet file may
// set: the names of relay run's per-source flags, and KEY-file for each
// secret.
func sourceKeys() map[string]bool {
	keys := map[string]bool{}
	for _, f := range sourceFlags() {
		if name := f.Names()[0]; !slices.Contains(processFlags, name) {
			keys[name] = true
		}
	}
	for _, s := range secretFlags {
		keys[s+fleet.FileSuffix] = true
	}
	return keys
}

// sourceParser reads a fleet file's sources as relay run's per-source
// flags; sc learns every secret they hold before anything can print it.
func sourceParser(sc *scrubber) *fleet.Parser {
	return &fleet.Parser{Keys: sourceKeys(), Secrets: secretFlags, Process: processFlags, Env: envName,
		Parse: func(flags []string) (*relay.Config, error) { return sourceConfig(flags, sc) }}
}

// loadFleet reads and validates the fleet file at path (fleet.Load).
func loadFleet(path string, sc *scrubber) (*fleet.File, error) {
	return fleet.Load(path, sourceParser(sc))
}

// sourceConfig builds a source's configuration from its settings, given
// as flag arguments, by parsing them as relay run's flags, so a fleet
// file and the command line can never mean different things.
func sourceConfig(flags []string, sc *scrubber) (*relay.Config, error) {
	args := append([]string{"relay", "source"}, flags...)
	var (
		cfg  *relay.Config
		perr error
	)
	app := &cli.App{
		Name:            "relay",
		Writer:          io.Discard,
		ErrWriter:       io.Discard,
		HideHelp:        true,
		HideHelpCommand: true,
		ExitErrHandler:  func(*cli.Context, error) {},
		Commands: []*cli.Command{{
			Name:            "source",
			Flags:           sourceFlags(),
			HideHelp:        true,
			SkipFlagParsing: false,
			Action: func(c *cli.Context) error {
				cfg, perr = readStreamConfig(c, sc, streamingConfig)
				return perr
			},
		}},
	}
	if err := app.Run(args); err != nil {
		if perr != nil {
			return nil, perr
		}
		return nil, err
	}
	return cfg, nil
}

// fleetAction is relay run --config: one relay per source of the file, in
// one process, until ctx ends; SIGHUP reloads the file (fleet.Run).
func fleetAction(c *cli.Context, sc *scrubber) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if err := fleetConflicts(c); err != nil {
		return err
	}
	logger, err := newLogger(c.App.ErrWriter, c.String(flagLogLevel), c.String(flagLogFormat), sc)
	if err != nil {
		return err
	}
	budget := cliutil.SizeFlagValue(c, flagFleetBuffer)
	if budget <= 0 {
		return usagef("--%s %d: want a positive size", flagFleetBuffer, budget)
	}
	hooks, stopTracing, err := startTracing(c, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	var memLimit int64
	err = fleet.Run(c.Context, fleet.Options{
		Path: c.String(flagConfig), Parser: sourceParser(sc), Logger: logger, Scrub: sc.String,
		InstanceID: c.String(flagInstanceID), Budget: budget, StrictTopics: c.Bool(flagStrictTopics),
		MetricsAddr: c.String(flagMetricsAddr), StatusAddr: c.String(flagStatusAddr),
		MemoryLimit: func(size int64, sources int) int64 {
			memLimit = memlimit.Update(memLimit, memlimit.ForFleet(size, sources), "--"+flagFleetBuffer, logger)
			return memLimit
		},
		LogAttrs:     logAttrs,
		PollInterval: configPollInterval,
		Hooks:        hooks,
	})
	if err != nil && !cliutil.IsUsage(err) {
		return fail(err)
	}
	return err
}

// configPollInterval is how often relay run --config looks for a changed
// fleet file.
var configPollInterval = 30 * time.Second

// flagStatusAddr is relay run --config's address of /status: empty for
// --metrics-addr's, statusOff for none.
const (
	flagStatusAddr = "status-addr"
	statusOff      = fleet.StatusOff
)

// statusAddrFlag is relay run's --status-addr.
func statusAddrFlag() cli.Flag {
	return stringFlag(flagStatusAddr, catOps, "",
		"with --config: serve /status (each source's state, database host, port and name, table, slot and last error) on this address of its own, "+
			"such as 127.0.0.1:9741; empty: on --metrics-addr; off: not at all (see docs/security.md)")
}

// flagFleetBuffer is relay run --config's budget of record bytes for all
// the sources; defaultFleetBuffer its default.
const (
	flagFleetBuffer    = "fleet-buffer-bytes"
	defaultFleetBuffer = 64 << 20
)

// fleetBufferFlag is relay run's --fleet-buffer-bytes.
func fleetBufferFlag() cli.Flag {
	return sizeFlag(flagFleetBuffer, catBatching, defaultFleetBuffer,
		"with --config: most record bytes all the sources hold together between the WAL readers and Kafka, each at most its --buffer-bytes; "+
			"each streaming source keeps a floor of this / (2 x sources), the rest goes to whichever needs it. The soft memory limit follows from it (see docs/fleet.md)")
}

// fleetConflicts refuses per-source settings given to relay run beside
// --config (flags or RELAY_* variables): in a fleet, they belong in the
// file, under defaults or a source.
func fleetConflicts(c *cli.Context) error {
	keys := sourceKeys()
	var set []string
	for k := range keys {
		if slices.Contains(secretFlags, k) {
			continue // below, with its *_FILE variable
		}
		if c.IsSet(k) {
			set = append(set, "--"+k+" or "+envName(k))
		}
	}
	for _, s := range secretFlags {
		if e := envName(s); c.IsSet(s) || os.Getenv(e) != "" || os.Getenv(e+cliutil.FileSuffix) != "" {
			set = append(set, "--"+s+", "+e+" or "+e+cliutil.FileSuffix)
		}
	}
	if len(set) == 0 {
		return nil
	}
	sort.Strings(set)
	return usagef("--%s: the file configures every source; move %s into it (under defaults: for all sources)", flagConfig, strings.Join(set, "; "))
}

// flagStrictTopics is relay run --config's refusal of a fleet whose
// sources may publish anywhere.
const flagStrictTopics = "strict-topics"

// strictTopicsFlag is relay run's --strict-topics.
func strictTopicsFlag() cli.Flag {
	return boolFlag(flagStrictTopics, catOps,
		"with --config: refuse a fleet of several sources where one has no allowed-topics (each source's rows may then publish to any topic, another tenant's included); without it, a warning")
}
