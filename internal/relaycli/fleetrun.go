package relaycli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/backoff"
	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// A source whose relay stopped with an error is started again after
// restartBackoff, doubling up to maxRestartBackoff, as a supervisor
// restarts a crashed single-source relay; a run that lasted stableRun
// resets the wait.
const (
	restartBackoff    = 10 * time.Second
	maxRestartBackoff = 5 * time.Minute
	stableRun         = 10 * time.Minute
)

// States of a source, as /status reports them.
const (
	stateStarting  = "starting"  // Run called, not streaming yet
	stateStreaming = "streaming" // this process streams the slot
	stateStandby   = "standby"   // another process streams the slot
	stateFailed    = "failed"    // Run ended with an error; restarting after a wait
	stateStopped   = "stopped"   // removed, or the process is stopping
	stateElsewhere = "elsewhere" // with spread: another replica leads it
)

// fleetAction is relay run --config: one relay per source of the file, in
// one process, until ctx ends; SIGHUP reloads the file.
func fleetAction(c *cli.Context, sc *scrubber) error {
	if err := noArgs(c); err != nil {
		return err
	}
	path := c.String(flagConfig)
	if err := fleetConflicts(c); err != nil {
		return err
	}
	logger, err := newLogger(c.App.ErrWriter, c.String(flagLogLevel), c.String(flagLogFormat), sc)
	if err != nil {
		return err
	}
	fc, err := loadFleet(path, sc)
	if err != nil {
		return err
	}
	strict := c.Bool(flagStrictTopics)
	if err := checkTopicBounds(fc.Sources, strict, logger); err != nil {
		return err
	}
	budget := cliutil.SizeFlagValue(c, flagFleetBuffer)
	if budget <= 0 {
		return usagef("--%s %d: want a positive size", flagFleetBuffer, budget)
	}

	ctx := c.Context
	f := &fleet{ctx: ctx, logger: logger, scrub: sc.String, sources: map[string]*source{}, spread: fc.Spread != nil, instanceID: c.String(flagInstanceID),
		budget: budget, shared: relay.NewSharedBuffer(int(budget))}
	f.sizeBuffer(fc.Sources)
	f.process = prometheus.NewRegistry()
	f.running = relaymetrics.NewFleetSourceRunning()
	f.process.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), f.running)
	statusAddr := c.String(flagStatusAddr)
	if addr := c.String(flagMetricsAddr); addr != "" {
		paths := "/metrics /healthz /readyz"
		if statusAddr == "" {
			paths += " /status"
		}
		ms, err := cliutil.Serve(addr, f.handler(statusAddr == ""), paths, logger)
		if err != nil {
			return fail(errors.Join(errors.New("--"+flagMetricsAddr), err))
		}
		defer ms.Close()
	}
	if statusAddr != "" && statusAddr != statusOff {
		mux := http.NewServeMux()
		mux.HandleFunc("/status", f.serveStatus)
		ss, err := cliutil.Serve(statusAddr, mux, "/status", logger)
		if err != nil {
			return fail(errors.Join(errors.New("--"+flagStatusAddr), err))
		}
		defer ss.Close()
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	logger.Info("relay fleet starting", "config", path, "sources", len(fc.Sources), "spread", fc.Spread != nil)
	f.setDesired(fc.Sources)
	if fc.Spread != nil {
		m, err := join(ctx, fc.Spread, fc.Sources, logger, f.setOwned)
		if err != nil {
			return fail(err)
		}
		defer m.close()
		f.member = m
	}
	watch := &fileWatch{path: path}
	watch.loaded(fc)
	reload := func(why string) {
		next, err := f.tryReload(path, sc, fc)
		if err == nil {
			err = checkTopicBounds(next.Sources, strict, logger)
		}
		if err != nil {
			logger.Error("reload refused: the running sources are unchanged", "why", why, "error", err)
			return
		}
		watch.loaded(next)
		logger.Info("reloading the fleet file", "why", why, "config", path, "sources", len(next.Sources))
		f.sizeBuffer(next.Sources)
		f.setDesired(next.Sources)
	}
	poll := time.NewTicker(configPollInterval)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			f.stop()
			logger.Info("relay fleet stopped")
			return nil
		case <-hup:
			reload("SIGHUP")
		case <-poll.C:
			// A Secret or ConfigMap volume is updated in place, and
			// nobody sends a signal: a changed file (or secret file) is
			// reloaded too, once it has settled.
			if watch.poll() {
				reload("the file changed")
			}
		}
	}
}

// tryReload loads the fleet file at path again and checks it against the
// running fleet (spread: unchanged, the group's topic grown to the
// sources). Anything wrong, a panic included, refuses the reload as a
// whole: the running sources are left as they are.
func (f *fleet) tryReload(path string, sc *scrubber, running *fleetConfig) (next *fleetConfig, err error) {
	defer func() {
		if r := recover(); r != nil {
			next, err = nil, fmt.Errorf("--%s %s: loading the file failed: %v", flagConfig, path, r)
		}
	}()
	next, err = loadFleet(path, sc)
	if err != nil {
		return nil, err
	}
	if (next.Spread == nil) != (running.Spread == nil) || next.Spread != nil && *next.Spread != *running.Spread {
		return nil, fmt.Errorf("--%s %s: %s: changes need a restart", flagConfig, path, fleetKeySpread)
	}
	if f.member != nil {
		if err := f.member.ensurePartitions(f.ctx, len(next.Sources)); err != nil {
			return nil, err
		}
	}
	return next, nil
}

// flagStatusAddr is relay run --config's address of /status: empty for
// --metrics-addr's, statusOff for none.
const (
	flagStatusAddr = "status-addr"
	statusOff      = "off"
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

// sizeBuffer sizes the sources' shared buffer for sources, at start and
// at each reload: --fleet-buffer-bytes, or the sum of their --buffer-bytes
// when that is less (each holds at most its own), and the process's soft
// memory limit from it (unless GOMEMLIMIT set one).
func (f *fleet) sizeBuffer(sources []fleetSource) {
	var sum int64
	for _, s := range sources {
		sum += int64(s.Config.BufferBytes)
	}
	size := min(f.budget, max(sum, 1))
	f.shared.Resize(size)
	f.memLimit = updateMemoryLimit(f.memLimit, fleetMemoryLimit(size, len(sources)), "--"+flagFleetBuffer, f.logger)
	f.logger.Debug("shared buffer sized", "buffer_bytes", size, "sources", len(sources), "memory_limit_bytes", f.memLimit)
}

// configPollInterval is how often relay run --config looks for a changed
// fleet file.
var configPollInterval = 30 * time.Second

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

// fleet is the sources a fleet process runs: those of the file, or with
// spread: those of the file whose partitions the group assigned here.
type fleet struct {
	ctx    context.Context
	logger *slog.Logger
	// process holds the process's own collectors (Go runtime, process,
	// running).
	process *prometheus.Registry
	// running is pgoutbox_fleet_source_running, set at each scrape.
	running *prometheus.GaugeVec
	// scrub removes known secrets from the errors /status shows.
	scrub func(string) string
	// instanceID is --instance-id, the process's: every source's records
	// carry it.
	instanceID string
	// spread says the group decides which sources run here; member is
	// this replica's membership once joined.
	spread bool
	member *member
	// budget is --fleet-buffer-bytes; shared the buffer the sources
	// share, at most budget; memLimit the soft memory limit set from it
	// (0 when GOMEMLIMIT set one).
	budget   int64
	shared   relaytype.SharedBuffer
	memLimit int64

	// reserved are the topics the relays of the fleet write, which no
	// source's row may publish to.
	reserved reservedTopics

	// rmu serializes reconciliations: a reload, a rebalance, the stop.
	rmu     sync.Mutex
	desired []fleetSource
	owned   []int32 // with spread: the partitions assigned here
	joined  bool    // with spread: an assignment arrived
	stopped bool

	mu      sync.Mutex
	sources map[string]*source
}

// setDesired makes sources the file's sources.
func (f *fleet) setDesired(sources []fleetSource) {
	f.rmu.Lock()
	defer f.rmu.Unlock()
	f.reserved.set(sources)
	f.mu.Lock()
	f.desired = sources
	f.mu.Unlock()
	f.reconcile()
}

// setOwned makes owned the partitions assigned here; it returns once the
// sources no longer owned have stopped (flushed and confirmed), so that
// the replica taking them over finds their slots free.
func (f *fleet) setOwned(owned []int32) {
	f.rmu.Lock()
	defer f.rmu.Unlock()
	f.mu.Lock()
	f.owned, f.joined = owned, true
	f.mu.Unlock()
	f.reconcile()
}

// stop stops every source; later reconciliations start nothing.
func (f *fleet) stop() {
	f.rmu.Lock()
	defer f.rmu.Unlock()
	f.stopped = true
	f.apply(f.ctx, nil)
}

// reconcile runs the sources that should run here. Called with rmu held.
func (f *fleet) reconcile() {
	if f.stopped {
		return
	}
	f.apply(f.ctx, f.led())
}

// led is the desired sources this replica leads: all of them, or with
// spread those mapped to the partitions it owns.
func (f *fleet) led() []fleetSource {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.spread {
		return f.desired
	}
	byPartition := assignment(f.desired)
	var out []fleetSource
	for _, p := range f.owned {
		for _, s := range f.desired {
			if s.Name == byPartition[p] {
				out = append(out, s)
			}
		}
	}
	return out
}

// source is one running source: its relay, its metrics and its state.
type source struct {
	fleetSource
	relay  *relay.Relay
	reg    *prometheus.Registry
	logger *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	state    string
	since    time.Time
	lastErr  error
	restarts int
}

// apply makes the running sources those of next: it stops the sources
// that are gone or whose settings changed (all at once, waiting for each
// to flush and confirm), then starts the new and changed ones. An
// unchanged source keeps running untouched.
func (f *fleet) apply(ctx context.Context, next []fleetSource) {
	keep := map[string]bool{}
	for _, n := range next {
		if s, ok := f.get(n.Name); ok && s.settings == n.settings {
			keep[n.Name] = true
		}
	}
	f.mu.Lock()
	var stopping []*source
	for name, s := range f.sources {
		if !keep[name] {
			stopping = append(stopping, s)
			delete(f.sources, name)
		}
	}
	f.mu.Unlock()
	for _, s := range stopping {
		s.cancel()
	}
	for _, s := range stopping {
		<-s.done
		s.logger.Info("source stopped")
	}
	for _, n := range next {
		if keep[n.Name] {
			continue
		}
		s, err := f.newSource(n)
		if err != nil {
			f.logger.Error("source not started", "source", n.Name, "error", err)
			continue
		}
		sctx, cancel := context.WithCancel(ctx)
		s.cancel = cancel
		f.mu.Lock()
		f.sources[n.Name] = s
		f.mu.Unlock()
		go s.supervise(sctx)
	}
}

func (f *fleet) get(name string) (*source, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sources[name]
	return s, ok
}

// newSource builds a source's relay, its metrics labelled source=NAME in
// a registry of its own (dropped with the source on a reload) and its
// logger.
func (f *fleet) newSource(n fleetSource) (*source, error) {
	cfg := *n.Config
	s := &source{fleetSource: n, reg: prometheus.NewRegistry(), logger: f.logger.With("source", n.Name), done: make(chan struct{}), state: stateStarting, since: time.Now()}
	cfg.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"source": n.Name}, s.reg)
	cfg.Logger = s.logger
	cfg.InstanceID = instanceOf(f.instanceID, n.Name)
	cfg.ReservedTopic = f.reserved.has
	cfg.SharedBuffer = f.shared
	r, err := relay.New(&cfg)
	if err != nil {
		return nil, err
	}
	s.relay = r
	s.Config = &cfg
	return s, nil
}

// instanceOf is the relay-instance header of a source's records: the
// process's --instance-id and the source's name (pod-7/orders), so a
// reader of a topic several sources write can tell which published a
// record; the name alone without --instance-id.
func instanceOf(instanceID, source string) string {
	if instanceID == "" {
		return source
	}
	return instanceID + "/" + source
}

// supervise runs the source's relay until ctx ends, starting it again
// after a wait when it stops with an error: a source that fails (a gap, a
// missing privilege, a permanent Kafka error) never stops the others.
func (s *source) supervise(ctx context.Context) {
	defer close(s.done)
	wait := backoff.New(restartBackoff, maxRestartBackoff)
	s.logger.Info("source starting", logAttrs(s.Config)...)
	for {
		s.set(stateStarting, nil)
		began := time.Now()
		err := s.relay.Run(ctx)
		if ctx.Err() != nil {
			s.set(stateStopped, nil)
			return
		}
		if err == nil {
			err = errors.New("relay stopped without an error")
		}
		if time.Since(began) >= stableRun {
			wait.Reset()
		}
		d := wait.Next()
		s.set(stateFailed, err)
		s.logger.Error("source failed; starting it again after a wait (the other sources go on)", "error", err, "retry_in", d.String())
		if !backoff.Sleep(ctx, d) {
			s.set(stateStopped, nil)
			return
		}
		s.mu.Lock()
		s.restarts++
		s.mu.Unlock()
	}
}

func (s *source) set(state string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != state {
		s.since = time.Now()
	}
	s.state, s.lastErr = state, err
}

// sourceStatus is a source in /status.
type sourceStatus struct {
	Name     string    `json:"name"`
	State    string    `json:"state"`
	Since    time.Time `json:"since"`
	Error    string    `json:"error,omitempty"`
	Restarts int       `json:"restarts"`
	Database string    `json:"database"`
	Table    string    `json:"table"`
	Slot     string    `json:"slot"`
}

// status is the source's state now: streaming or standby as its relay
// says, else what supervise last set.
func (s *source) status() sourceStatus {
	s.mu.Lock()
	st := sourceStatus{Name: s.Name, State: s.state, Since: s.since, Restarts: s.restarts, Table: s.Config.Table, Slot: s.Config.Slot}
	if s.lastErr != nil {
		st.Error = s.lastErr.Error()
	}
	s.mu.Unlock()
	if st.State == stateStarting {
		switch {
		case s.relay.Ready():
			st.State = stateStreaming
		case s.relay.Standby():
			st.State = stateStandby
		}
	}
	st.Database = databaseName(s.Config.DatabaseURL)
	return st
}

// bufferStatus is the shared buffer in /status: its size and the record
// bytes the sources hold now.
type bufferStatus struct {
	Bytes int64 `json:"bytes"`
	Used  int64 `json:"used"`
}

// statuses lists every source of the file by name: those running here as
// their relays say, the others as led elsewhere (spread) or stopped.
func (f *fleet) statuses() []sourceStatus {
	f.mu.Lock()
	list := make([]*source, 0, len(f.sources))
	for _, s := range f.sources {
		list = append(list, s)
	}
	var idle []sourceStatus
	for _, d := range f.desired {
		if _, ok := f.sources[d.Name]; !ok {
			st := sourceStatus{Name: d.Name, State: stateStopped, Table: d.Config.Table, Slot: d.Config.Slot, Database: databaseName(d.Config.DatabaseURL)}
			if f.spread {
				st.State = stateElsewhere
			}
			idle = append(idle, st)
		}
	}
	f.mu.Unlock()
	out := make([]sourceStatus, 0, len(list)+len(idle))
	for _, s := range list {
		st := s.status()
		st.Error = f.scrub(st.Error)
		out = append(out, st)
	}
	out = append(out, idle...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// databaseName is where a database URL points, without its credentials.
func databaseName(url string) string {
	pg, err := pgconn.ParseConfig(url)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s:%d/%s", pg.Host, pg.Port, pg.Database)
}

// Gather gathers the process's collectors and every source's metrics,
// after setting which sources of the file run here.
func (f *fleet) Gather() ([]*dto.MetricFamily, error) {
	if f.running != nil {
		f.running.Reset()
		for _, st := range f.statuses() {
			v := 1.0
			if st.State == stateElsewhere || st.State == stateStopped {
				v = 0
			}
			f.running.WithLabelValues(st.Name).Set(v)
		}
	}
	f.mu.Lock()
	gs := prometheus.Gatherers{f.process}
	for _, s := range f.sources {
		gs = append(gs, s.reg)
	}
	f.mu.Unlock()
	return gs.Gather()
}

// serveStatus answers /status: every source as JSON, and the shared
// buffer.
func (f *fleet) serveStatus(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Sources []sourceStatus `json:"sources"`
		Buffer  bufferStatus   `json:"buffer"`
	}{f.statuses(), bufferStatus{Bytes: f.shared.Size(), Used: f.shared.Used()}})
}

// handler serves /metrics, /healthz (200 while the process runs), /status
// (every source as JSON; withStatus, else --status-addr serves it or
// nothing does) and /readyz: 200 while every source this replica
// leads streams here (with spread: once the group assigned it its share);
// with ?standby=ok also while one waits as a standby; with ?source=NAME for
// that source only (503 while led elsewhere, 404 for a source not in the
// file).
func (f *fleet) handler(withStatus bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(f, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", cliutil.Healthz)
	if withStatus {
		mux.HandleFunc("/status", f.serveStatus)
	}
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		standbyOK := r.URL.Query().Get("standby") == "ok"
		want := r.URL.Query().Get("source")
		found := false
		var waiting []string
		f.mu.Lock()
		joining := f.spread && !f.joined
		f.mu.Unlock()
		if joining {
			http.Error(w, "not ready: joining the spread group", http.StatusServiceUnavailable)
			return
		}
		for _, st := range f.statuses() {
			if want != "" && st.Name != want {
				continue
			}
			found = true
			if st.State == stateElsewhere && want == "" {
				continue // another replica's to lead
			}
			if !(st.State == stateStreaming || standbyOK && st.State == stateStandby) {
				waiting = append(waiting, st.Name+" "+st.State)
			}
		}
		switch {
		case want != "" && !found:
			http.Error(w, "no source "+want, http.StatusNotFound)
		case len(waiting) > 0:
			http.Error(w, fmt.Sprintf("not ready: %v", waiting), http.StatusServiceUnavailable)
		case standbyOK:
			_, _ = w.Write([]byte("ready or standby\n"))
		default:
			_, _ = w.Write([]byte("ready\n"))
		}
	})
	return mux
}
