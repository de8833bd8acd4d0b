package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/pgoutbox/pgoutbox/internal/backoff"
	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relayhook"
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

// Options configure Run.
type Options struct {
	// Path is the fleet file (--config).
	Path string
	// Parser reads a source's settings.
	Parser *Parser
	// Logger is the process's logger; each source's is Logger.With("source", NAME).
	Logger *slog.Logger
	// Scrub removes known secrets from the errors /status shows.
	Scrub func(string) string
	// InstanceID is --instance-id, the process's: every source's records
	// carry it, with the source's name.
	InstanceID string
	// Budget is --fleet-buffer-bytes: the most record bytes all the
	// sources hold together.
	Budget int64
	// StrictTopics refuses a fleet of several sources where one has no
	// allowed-topics; without it, a warning.
	StrictTopics bool
	// MetricsAddr serves /metrics, /healthz, /readyz (and /status unless
	// StatusAddr is set); empty: none.
	MetricsAddr string
	// StatusAddr serves /status on an address of its own; StatusOff: not
	// at all; empty: on MetricsAddr.
	StatusAddr string
	// MemoryLimit sets the process's soft memory limit for a shared
	// buffer of bufferBytes and that many sources, at start and at each
	// reload, and returns it (0: not set, GOMEMLIMIT's).
	MemoryLimit func(bufferBytes int64, sources int) int64
	// LogAttrs describes a source's configuration, without secrets, for
	// its start-up log line.
	LogAttrs func(*relay.Config) []any
	// PollInterval is how often the file and its secret files are read
	// for a change. Defaults to 30s.
	PollInterval time.Duration
	// Hooks are every source's relay hooks (--tracing, a process
	// setting): each source's relay.Config.Hooks.
	Hooks []relayhook.Hook
}

// defaultPollInterval is Options.PollInterval's default.
const defaultPollInterval = 30 * time.Second

// StatusOff is Options.StatusAddr for no /status at all.
const StatusOff = "off"

// Run is relay run --config: one relay per source of the file, in one
// process, until ctx ends; SIGHUP reloads the file, and so does a
// settled change of the file or of its secret files.
func Run(ctx context.Context, o Options) error {
	logger, path, parser := o.Logger, o.Path, o.Parser
	fc, err := Load(path, parser)
	if err != nil {
		return err
	}
	strict := o.StrictTopics
	if err := checkTopicBounds(fc.Sources, strict, logger); err != nil {
		return err
	}
	budget := o.Budget
	f := &fleet{ctx: ctx, logger: logger, scrub: o.Scrub, sources: map[string]*source{}, spread: fc.Spread != nil, instanceID: o.InstanceID,
		budget: budget, shared: relay.NewSharedBuffer(int(budget)), memoryLimit: o.MemoryLimit, logAttrs: o.LogAttrs, hooks: o.Hooks}
	f.sizeBuffer(fc.Sources)
	f.process = prometheus.NewRegistry()
	f.running = relaymetrics.NewFleetSourceRunning()
	f.process.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), f.running)
	statusAddr := o.StatusAddr
	if addr := o.MetricsAddr; addr != "" {
		paths := "/metrics /healthz /readyz"
		if statusAddr == "" {
			paths += " /status"
		}
		ms, err := cliutil.Serve(addr, f.handler(statusAddr == ""), paths, logger)
		if err != nil {
			return errors.Join(errors.New("--metrics-addr"), err)
		}
		defer ms.Close()
	}
	if statusAddr != "" && statusAddr != StatusOff {
		mux := http.NewServeMux()
		mux.HandleFunc("/status", f.serveStatus)
		ss, err := cliutil.Serve(statusAddr, mux, "/status", logger)
		if err != nil {
			return errors.Join(errors.New("--status-addr"), err)
		}
		defer ss.Close()
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	logger.Info("relay fleet starting", "config", path, "sources", len(fc.Sources), "spread", fc.Spread != nil)
	fc.Spread.warnWithoutSecret(logger)
	f.setDesired(fc.Sources)
	if fc.Spread != nil {
		m, err := join(ctx, fc.Spread, fc.Sources, logger, f.setOwned)
		if err != nil {
			return err
		}
		defer m.close()
		f.mu.Lock()
		f.member = m
		f.mu.Unlock()
	}
	watch := &fileWatch{path: path}
	watch.loaded(fc)
	reload := func(why string) {
		next, err := f.tryReload(path, parser, fc)
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
	poll := time.NewTicker(cmp.Or(o.PollInterval, defaultPollInterval))
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
func (f *fleet) tryReload(path string, parser *Parser, running *File) (next *File, err error) {
	defer func() {
		if r := recover(); r != nil {
			next, err = nil, fmt.Errorf("--%s %s: loading the file failed: %v", flagConfig, path, r)
		}
	}()
	next, err = Load(path, parser)
	if err != nil {
		return nil, err
	}
	if (next.Spread == nil) != (running.Spread == nil) || next.Spread != nil && *next.Spread != *running.Spread {
		return nil, fmt.Errorf("--%s %s: %s: changes need a restart", flagConfig, path, fleetKeySpread)
	}
	f.mu.Lock()
	m := f.member
	f.mu.Unlock()
	if m != nil {
		if err := m.ensurePartitions(f.ctx, len(next.Sources)); err != nil {
			return nil, err
		}
	}
	return next, nil
}

// sizeBuffer sizes the sources' shared buffer for sources, at start and
// at each reload: --fleet-buffer-bytes, or the sum of their --buffer-bytes
// when that is less (each holds at most its own), and the process's soft
// memory limit from it (unless GOMEMLIMIT set one).
func (f *fleet) sizeBuffer(sources []Source) {
	var sum int64
	for _, s := range sources {
		sum += int64(s.Config.BufferBytes)
	}
	size := min(f.budget, max(sum, 1))
	f.shared.Resize(size)
	if f.memoryLimit != nil {
		f.memLimit = f.memoryLimit(size, len(sources))
	}
	f.logger.Debug("shared buffer sized", "buffer_bytes", size, "sources", len(sources), "memory_limit_bytes", f.memLimit)
}

// fleet is the sources a fleet process runs: those of the file, or with
// spread: those of the file whose partitions the group assigned here.
type fleet struct {
	ctx    context.Context
	logger *slog.Logger
	hooks  []relayhook.Hook // every source's relay hooks (--tracing)
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
	// (0 when GOMEMLIMIT set one) by memoryLimit.
	budget      int64
	shared      relaytype.SharedBuffer
	memLimit    int64
	memoryLimit func(bufferBytes int64, sources int) int64
	// logAttrs describes a source for its start-up log line.
	logAttrs func(*relay.Config) []any

	// reserved are the topics the relays of the fleet write, which no
	// source's row may publish to.
	reserved reservedTopics

	// rmu serializes reconciliations: a reload, a rebalance, the stop.
	rmu     sync.Mutex
	desired []Source
	owned   []int32 // with spread: the partitions assigned here
	joined  bool    // with spread: an assignment arrived
	stopped bool

	mu      sync.Mutex
	sources map[string]*source
	// loaded: setDesired has run once. Until then /readyz fails: the
	// metrics address serves before the sources start, and a fleet with
	// no source yet has none that is not streaming.
	loaded bool
}

// setDesired makes sources the file's sources.
func (f *fleet) setDesired(sources []Source) {
	f.rmu.Lock()
	defer f.rmu.Unlock()
	f.reserved.set(sources)
	f.mu.Lock()
	f.desired = sources
	f.mu.Unlock()
	f.reconcile()
	f.mu.Lock()
	f.loaded = true
	f.mu.Unlock()
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
func (f *fleet) led() []Source {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.spread {
		return f.desired
	}
	byPartition := assignment(f.desired)
	var out []Source
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
	Source
	relay  *relay.Relay
	reg    *prometheus.Registry
	logger *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
	// logAttrs describes the source for its start-up log line.
	logAttrs func(*relay.Config) []any

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
func (f *fleet) apply(ctx context.Context, next []Source) {
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
func (f *fleet) newSource(n Source) (*source, error) {
	cfg := *n.Config
	s := &source{Source: n, reg: prometheus.NewRegistry(), logger: f.logger.With("source", n.Name), done: make(chan struct{}), state: stateStarting, since: time.Now()}
	cfg.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"source": n.Name}, s.reg)
	cfg.Logger = s.logger
	cfg.InstanceID = instanceOf(f.instanceID, n.Name)
	cfg.ReservedTopic = f.reserved.has
	cfg.SharedBuffer = f.shared
	cfg.Hooks = f.hooks
	r, err := relay.New(&cfg)
	if err != nil {
		return nil, err
	}
	s.relay = r
	s.Config = &cfg
	s.logAttrs = f.logAttrs
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
	var attrs []any
	if s.logAttrs != nil {
		attrs = s.logAttrs(s.Config)
	}
	s.logger.Info("source starting", attrs...)
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

// orphaned is the sources of the file that no relay of the fleet has held
// for longer than the grace (with spread; see heldWatch): a client of the
// group that is not a relay holds them, or nobody does.
func (f *fleet) orphaned(now time.Time) map[string]bool {
	f.mu.Lock()
	m := f.member
	byPartition := assignment(f.desired)
	f.mu.Unlock()
	if m == nil {
		return nil
	}
	out := map[string]bool{}
	for _, p := range m.unheld(now) {
		if name, ok := byPartition[p]; ok {
			out[name] = true
		}
	}
	return out
}

// handler serves /metrics, /healthz (200 while the process runs), /status
// (every source as JSON; withStatus, else --status-addr serves it or
// nothing does) and /readyz: 503 until the sources of the file have
// started (the address serves before), then 200 while every source this replica
// leads streams here (with spread: once the group assigned it its share);
// with ?standby=ok also while one waits as a standby; with ?source=NAME for
// that source only (503 while led elsewhere, 404 for a source not in the
// file). With spread, a source that no relay of the fleet has held for
// three session timeouts (a client of the group that is not a relay took
// it) fails /readyz on every replica.
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
		loaded, joining := f.loaded, f.spread && !f.joined
		f.mu.Unlock()
		if !loaded {
			http.Error(w, "not ready: starting the sources", http.StatusServiceUnavailable)
			return
		}
		if joining {
			http.Error(w, "not ready: joining the spread group", http.StatusServiceUnavailable)
			return
		}
		orphaned := f.orphaned(time.Now())
		for _, st := range f.statuses() {
			if want != "" && st.Name != want {
				continue
			}
			found = true
			if st.State == stateElsewhere && orphaned[st.Name] {
				waiting = append(waiting, st.Name+" elsewhere on every replica (no relay of the fleet holds it)")
				continue
			}
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
