package relaycli

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/kafkaflags"
	"github.com/pgoutbox/pgoutbox/internal/memlimit"
	"github.com/pgoutbox/pgoutbox/internal/report"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

const (
	flagFrom         = "from"
	flagTo           = "to"
	flagList         = "list"
	flagMargin       = "margin"
	flagGrace        = "grace"
	flagMaxInMemory  = "max-in-memory"
	flagSpillDir     = "spill-dir"
	flagMaxSpill     = "max-spill-bytes"
	flagMaxTopics    = "max-topics"
	flagMaxTopicB    = "max-topic-bytes"
	flagMetricsFile  = "metrics-file"
	flagPushgateway  = "pushgateway"
	flagPushJob      = "pushgateway-job"
	flagEvery        = "every"
	flagAllowEmpty   = "allow-empty"
	flagFullKeys     = "full-keys"
	catVerify        = "Window and output"
	defaultPushJob   = "pgoutbox_verify"
	defaultVerifyFor = "1h"
)

func verifyCommand(sc *scrubber) *cli.Command {
	return cliutil.WithHelp(helpFiles, &cli.Command{
		Name:   "verify",
		Flags:  verifyFlags(),
		Action: func(c *cli.Context) error { return verifyAction(c, sc) },
	})
}

// verifyFlags are the database flags, the Kafka flags of relay run that
// verify needs (picked from runFlags, so they stay one definition), and
// verify's own.
func verifyFlags() []cli.Flag {
	// Routing as the relay routes (a row it dead-letters is looked for in
	// the dead-letter topic), and every flag that reaches Kafka.
	want := []string{flagBrokers, flagTopicTemplate, flagDLQTopic, flagAllowedTopics, flagProgressTopic}
	for _, f := range sinkFlags() {
		want = append(want, f.Names()[0])
	}
	for _, f := range kafkaflags.Flags(func(string) string { return "" }, "") {
		want = append(want, f.Names()[0])
	}
	flags := databaseFlags()
	for _, f := range runFlags() {
		if slices.Contains(want, f.Names()[0]) {
			flags = append(flags, f)
		}
	}
	str := func(name, usage string) cli.Flag {
		return &cli.StringFlag{Name: name, Category: catVerify, EnvVars: envVar(name), Usage: usage}
	}
	dur := func(name string, def time.Duration, usage string) cli.Flag {
		return durationFlag(name, catVerify, def, usage)
	}
	flags = append(flags,
		str(flagSince, "verify the rows created in the last DURATION (1h), or since an RFC 3339 time; default 1h unless --from is given"),
		str(flagFrom, "window start, RFC 3339 time or a duration meaning that long ago (instead of --since)"),
		str(flagTo, "window end, RFC 3339 time or a duration meaning that long ago (default: now)"),
		boolFlag(flagJSON, catVerify, "print the report as JSON"),
		intFlag(flagList, catVerify, relaytype.DefaultVerifyList,
			"how many missing rows, duplicates, mismatches and order breaks to name (each); 0 for none"),
		dur(flagMargin, relaytype.DefaultVerifyMargin, "read the topics from this long before the window's start (by record timestamp: clock skew, a failover); 0 for none"),
		dur(flagGrace, relaytype.DefaultVerifyGrace, "a row created less than this before the run and not yet in Kafka is pending, not missing; 0 for none"),
		boolFlag(flagFullKeys, catVerify,
			"list keys, business keys and aggregate IDs whole (default: a prefix, the length and a hash: they are often personal data)"),
		boolFlag(flagAllowEmpty, catVerify,
			"a window without outbox rows is a clean run (exit 0); by default it exits 1: an audit that checks nothing passes nothing"),
		intFlag(flagMaxInMemory, catVerify, relaytype.DefaultVerifyMaxInMemory,
			"most entries (rows, records) each sort holds in memory (~100 bytes plus keys each); beyond it sorted runs spill to --spill-dir"),
		str(flagSpillDir, "directory of the spill files, removed at the end (default: the system temp directory)"),
		sizeFlag(flagMaxSpill, catVerify, relaytype.DefaultVerifyMaxSpillBytes,
			"most bytes a run writes to its spill files; past it the run fails (exit 1) rather than fill the disk"),
		intFlag(flagMaxTopics, catVerify, relaytype.DefaultVerifyMaxTopics,
			"most distinct topics the window's rows may route to (each is kept in memory and read); past it the run fails (exit 1)"),
		sizeFlag(flagMaxTopicB, catVerify, relaytype.DefaultVerifyMaxTopicBytes,
			"most bytes of the names of the distinct topics the window's rows route to; past it the run fails (exit 1)"),
		str(flagMetricsFile, "write the pgoutbox_verify_* gauges to this file (atomically), for node_exporter's textfile collector"),
		str(flagPushgateway, "push the pgoutbox_verify_* gauges to this Prometheus Pushgateway URL (https://HOST:PORT) after each run, grouped by job and table; a failed push fails the run"),
		stringFlag(flagPushJob, catVerify, defaultPushJob, "job label of the pushed gauges"),
		dur(flagEvery, 0, "keep running: verify the --since window again at this interval, serving the gauges on --metrics-addr (0: verify once and exit); --since must be at least --every plus --grace, or some rows are never checked"),
		stringFlag(flagMetricsAddr, catVerify, "",
			"with --every, serve /metrics on this address (empty: do not serve); a single run ignores it (RELAY_METRICS_ADDR may be set for relay run) and writes the gauges with --metrics-file or --pushgateway"),
	)
	flags = append(flags, fleetFileFlags("verify every source it lists (its database, table and Kafka settings from the file; the window and output flags from here), each under its name; the gauges get a source label")...)
	return append(flags, pushFlags()...)
}

// verifyRun is a parsed verify command line.
type verifyRun struct {
	cfg        *relay.Config
	source     string // its name in a fleet file; empty for one relay
	opts       relaytype.VerifyOptions
	since      time.Duration // the sliding window's length; 0 for a fixed window
	every      time.Duration
	allowEmpty bool
	metrics    *relay.VerifyMetrics
	push       *report.Pusher // nil without --pushgateway
}

func verifyConfig(c *cli.Context, sc *scrubber) (*verifyRun, error) {
	if err := noArgs(c); err != nil {
		return nil, err
	}
	cfg, err := verifySourceConfig(c, sc)
	if err != nil {
		return nil, err
	}
	v, err := newVerifyRun(c, sc, cfg, "")
	if err != nil {
		return nil, err
	}
	warnSecretFlags(sc, cfg.Logger)
	return v, nil
}

// verifySourceConfig reads what verify needs to know of the relay it
// audits: the database flags, the sink, Kafka and routing flags.
func verifySourceConfig(c *cli.Context, sc *scrubber) (*relay.Config, error) {
	cfg, err := databaseConfig(c, sc)
	if err != nil {
		return nil, err
	}
	if err := sinkConfig(c, sc, cfg); err != nil {
		return nil, err
	}
	if cfg.Kafka.Brokers, err = brokers(c.StringSlice(flagBrokers)); err != nil && (isKafkaSink(c) || len(c.StringSlice(flagBrokers)) > 0) {
		return nil, err
	}
	if err := topicTemplate(c, cfg); err != nil {
		return nil, err
	}
	cfg.DeadLetterTopic = c.String(flagDLQTopic)
	cfg.Kafka.ProgressTopic = c.String(flagProgressTopic)
	cfg.AllowedTopics = allowedTopics(c)
	if err := kafkaSecurity(c, sc, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// newVerifyRun reads verify's own flags (window, output, resources,
// export) for the relay of cfg; source names it in a fleet file (empty
// for a single relay).
func newVerifyRun(c *cli.Context, sc *scrubber, cfg *relay.Config, source string) (*verifyRun, error) {
	var err error
	v := &verifyRun{cfg: cfg, source: source, every: c.Duration(flagEvery), allowEmpty: c.Bool(flagAllowEmpty), metrics: relay.NewVerifyMetrics(cfg.Table, c.Bool(flagAllowEmpty))}
	if v.push, err = newPusher(c, sc, v.metrics, cfg.Table, source); err != nil {
		return nil, err
	}
	if err := v.window(c, time.Now()); err != nil {
		return nil, err
	}
	v.opts.List, v.opts.FullKeys = c.Int(flagList), c.Bool(flagFullKeys)
	if v.opts.List == 0 {
		v.opts.List = -1
	}
	v.opts.Margin, v.opts.Grace = c.Duration(flagMargin), c.Duration(flagGrace)
	v.opts.MaxInMemory, v.opts.SpillDir = c.Int(flagMaxInMemory), c.String(flagSpillDir)
	if v.opts.MaxSpillBytes = cliutil.SizeFlagValue(c, flagMaxSpill); v.opts.MaxSpillBytes < 1 {
		return nil, usagef("--%s must be at least 1 byte", flagMaxSpill)
	}
	v.opts.MaxTopics, v.opts.MaxTopicBytes = c.Int(flagMaxTopics), cliutil.SizeFlagValue(c, flagMaxTopicB)
	if v.opts.MaxTopics < 1 || v.opts.MaxTopicBytes < 1 {
		return nil, usagef("--%s and --%s must be at least 1", flagMaxTopics, flagMaxTopicB)
	}
	switch {
	case c.Int(flagList) < 0:
		return nil, usagef("--%s must not be negative", flagList)
	case v.opts.Margin < 0 || v.opts.Grace < 0:
		return nil, usagef("--%s and --%s must not be negative", flagMargin, flagGrace)
	case v.opts.MaxInMemory < 1:
		return nil, usagef("--%s must be at least 1", flagMaxInMemory)
	case v.every < 0:
		return nil, usagef("--%s must not be negative", flagEvery)
	case v.every > 0 && v.since == 0:
		return nil, usagef("--%s needs a sliding window (--since DURATION), not --from/--to", flagEvery)
	case v.every > 0 && v.since < v.every+v.opts.Grace:
		// A row younger than the grace is pending in one run and out of
		// the next run's window: never checked.
		return nil, usagef("--%s %v with --%s %v and --%s %v leaves rows unchecked (pending in one run, outside the next one's window): use --%s %v or more",
			flagSince, v.since, flagEvery, v.every, flagGrace, v.opts.Grace, flagSince, v.every+v.opts.Grace)
	}
	// 0 on the command line means none; the library reads 0 as its default.
	for _, d := range []*time.Duration{&v.opts.Margin, &v.opts.Grace} {
		if *d == 0 {
			*d = -1
		}
	}
	return v, nil
}

// window reads --since or --from/--to.
func (v *verifyRun) window(c *cli.Context, now time.Time) error {
	since, from, to := c.String(flagSince), c.String(flagFrom), c.String(flagTo)
	if since != "" && from != "" {
		return usagef("--%s and --%s are two ways to say where the window starts: give one", flagSince, flagFrom)
	}
	if since == "" && from == "" {
		since = defaultVerifyFor
	}
	if since != "" {
		d, err := time.ParseDuration(since)
		if err == nil && d > 0 && to == "" {
			v.since = d
		}
		from = since
	}
	startFlag := flagFrom
	if since != "" {
		startFlag = flagSince
	}
	var err error
	if v.opts.From, err = parseTime(from, now); err != nil {
		return usagef("--%s: %v", startFlag, err)
	}
	v.opts.To = now
	if to != "" {
		if v.opts.To, err = parseTime(to, now); err != nil {
			return usagef("--%s: %v", flagTo, err)
		}
	}
	if !v.opts.To.After(v.opts.From) {
		return usagef("the window's end (%s) must be after its start (%s)", v.opts.To.UTC().Format(time.RFC3339), v.opts.From.UTC().Format(time.RFC3339))
	}
	return nil
}

func verifyAction(c *cli.Context, sc *scrubber) error {
	if c.String(flagConfig) != "" {
		return verifyFleet(c, sc)
	}
	if c.IsSet(flagSource) {
		return usagef("--%s picks a source of the fleet file: it needs --%s", flagSource, flagConfig)
	}
	v, err := verifyConfig(c, sc)
	if err != nil {
		return err
	}
	setVerifyMemoryLimit(c, v.cfg.Logger)
	m := v.metrics
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	if v.every == 0 {
		return v.once(c, m, reg)
	}
	return verifyEvery(c, v.every, reg, v.cfg.Logger, func(now time.Time) error {
		v.opts.From, v.opts.To = now.Add(-v.since), now
		return v.once(c, m, reg)
	})
}

// verifyEvery is relay verify --every: it serves reg on --metrics-addr
// and calls once every interval (its window ending now) until the command
// is cancelled, logging a run's problems.
func verifyEvery(c *cli.Context, every time.Duration, reg *prometheus.Registry, logger *slog.Logger, once func(now time.Time) error) error {
	if addr := c.String(flagMetricsAddr); addr != "" {
		srv, err := cliutil.ServeMetrics(addr, reg, alwaysReady{}, logger)
		if err != nil {
			return fail(fmt.Errorf("metrics: %w", err))
		}
		defer srv.Close()
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := once(time.Now()); err != nil && c.Context.Err() == nil {
			logger.Warn("verify found problems or failed", "error", err)
		}
		select {
		case <-c.Context.Done():
			return nil
		case <-tick.C:
		}
	}
}

// alwaysReady is the /readyz role of relay verify --every: it has no slot
// to stream, so it is ready while it runs.
type alwaysReady struct{}

func (alwaysReady) Ready() bool   { return true }
func (alwaysReady) Standby() bool { return false }

// once verifies the window once, prints the report, exports the gauges,
// and returns the verdict as an error (exit 1) when a row is not
// accounted for.
func (v *verifyRun) once(c *cli.Context, m *relay.VerifyMetrics, reg *prometheus.Registry) error {
	rep, err := relay.Verify(c.Context, v.cfg, v.opts)
	if errors.Is(err, relaytype.ErrConfig) {
		return usagef("%v", err)
	}
	m.Set(rep, err)
	// The result must arrive: a failed export fails the run, even a
	// clean one (the alerts on the gauges would never fire).
	merr := v.export(c, reg)
	if err != nil {
		return fail(errors.Join(err, merr))
	}
	if c.Bool(flagJSON) {
		if err := report.VerifyJSON(c.App.Writer, v.source, rep); err != nil {
			return fail(err)
		}
	} else {
		report.Verify(c.App.Writer, v.source, v.cfg.Table, rep)
	}
	if merr != nil {
		return fail(merr)
	}
	if !rep.OK() {
		return fail(fmt.Errorf("verify: %s", report.Verdict(rep)))
	}
	if rep.Rows == 0 && !v.allowEmpty {
		return fail(fmt.Errorf("verify: the window %s .. %s holds no outbox rows of %s: nothing was checked (--%s accepts an empty window)",
			rep.From.UTC().Format(time.RFC3339), rep.To.UTC().Format(time.RFC3339), v.cfg.Table, flagAllowEmpty))
	}
	return nil
}

// export writes the gauges to --metrics-file and pushes them to
// --pushgateway.
func (v *verifyRun) export(c *cli.Context, reg *prometheus.Registry) error {
	var errs []error
	if path := c.String(flagMetricsFile); path != "" {
		if err := prometheus.WriteToTextfile(path, reg); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", flagMetricsFile, err))
		}
	}
	if v.push != nil {
		if err := v.push.Push(c.Context); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", flagPushgateway, err))
		}
	}
	return errors.Join(errs...)
}

// setVerifyMemoryLimit gives verify the soft memory limit of its
// --max-in-memory, unless --full-keys makes its entries as large as the
// keys they hold.
func setVerifyMemoryLimit(c *cli.Context, logger *slog.Logger) {
	if !c.Bool(flagFullKeys) {
		memlimit.Set(memlimit.ForVerify(c.Int(flagMaxInMemory)), "--max-in-memory", logger)
	}
}
