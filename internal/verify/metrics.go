package verify

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics is a prometheus.Collector of the pgoutbox_verify_* gauges,
// describing the last run Set was given: what a cron job writes to a
// node_exporter textfile or pushes to a Pushgateway, or what `relay verify
// --every` serves on --metrics-addr. Every gauge is labelled with the
// outbox table.
type Metrics struct {
	table string
	// AllowEmpty makes a run over a window without rows ok; by default
	// pgoutbox_verify_ok is 0 for it (an audit that checked nothing).
	AllowEmpty bool
	mu         sync.Mutex
	rep        *Report
	err        error
	set        bool
}

// NewMetrics returns the collector for table's runs.
func NewMetrics(table string) *Metrics { return &Metrics{table: table} }

// Set records the outcome of a run: its report, or the error that stopped
// it before a verdict.
func (m *Metrics) Set(rep *Report, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rep, m.err, m.set = rep, err, true
}

type metric struct {
	name, help string
	value      func(r *Report) float64
}

func b2f(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}

// reportMetrics are the gauges of a run that reached a verdict.
var reportMetrics = []metric{
	{"last_run_timestamp_seconds", "When the last verify run started (Unix seconds).", func(r *Report) float64 { return float64(r.Started.UnixMilli()) / 1e3 }},
	{"duration_seconds", "How long the last verify run took.", func(r *Report) float64 { return r.Duration.Seconds() }},
	{"window_start_timestamp_seconds", "Start of the window the last run verified (Unix seconds).", func(r *Report) float64 { return float64(r.From.UnixMilli()) / 1e3 }},
	{"window_end_timestamp_seconds", "End of the window the last run verified (Unix seconds).", func(r *Report) float64 { return float64(r.To.UnixMilli()) / 1e3 }},
	{"rows", "Outbox rows of the window still in the table.", func(r *Report) float64 { return float64(r.Rows) }},
	{"found_rows", "Rows with a record in their topic.", func(r *Report) float64 { return float64(r.Found) }},
	{"dead_lettered_rows", "Rows found only in the dead-letter topic.", func(r *Report) float64 { return float64(r.DeadLettered) }},
	{"missing_rows", "Rows in no topic, older than the grace period.", func(r *Report) float64 { return float64(r.Missing) }},
	{"pending_rows", "Rows in no topic yet, newer than the grace period.", func(r *Report) float64 { return float64(r.Pending) }},
	{"duplicate_records", "Records beyond the first of a row.", func(r *Report) float64 { return float64(r.Duplicates) }},
	{"mismatched_records", "Records whose key, business-key header or topic disagree with their row.", func(r *Report) float64 { return float64(r.Mismatched) }},
	{"order_breaks", "First deliveries committed before one delivered ahead of them in their aggregate's partition.", func(r *Report) float64 { return float64(r.OrderBreaks) }},
	{"records_read", "Records read from the topics.", func(r *Report) float64 { return float64(r.RecordsRead) }},
	{"unverifiable_records", "Records of the window's pruned range that match no row left in the table.", func(r *Report) float64 { return float64(r.Unverifiable) }},
}

var (
	errorMetric = metric{"error", "1 when the last verify run failed before reaching a verdict (unreachable database or brokers, ...).", nil}
	okMetric    = metric{"ok", "1 when the last verify run found every row of its window: nothing missing, mismatched or out of order (and the window held rows, unless --allow-empty).", nil}
)

// desc is x's descriptor, labelled with the table unless unlabelled.
func (m *Metrics) desc(x metric, unlabelled bool) *prometheus.Desc {
	var labels prometheus.Labels
	if !unlabelled {
		labels = prometheus.Labels{"table": m.table}
	}
	return prometheus.NewDesc("pgoutbox_verify_"+x.name, x.help, nil, labels)
}

// Describe sends the descriptors of every gauge.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) { m.describe(ch, false) }

// Collect sends the gauges of the last run; nothing before the first.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) { m.collect(ch, false) }

// Unlabelled is m without the table label on its gauges, for a push that
// groups by table (a Pushgateway refuses a pushed series that carries a
// grouping label itself).
func (m *Metrics) Unlabelled() prometheus.Collector { return unlabelled{m} }

type unlabelled struct{ m *Metrics }

func (u unlabelled) Describe(ch chan<- *prometheus.Desc) { u.m.describe(ch, true) }
func (u unlabelled) Collect(ch chan<- prometheus.Metric) { u.m.collect(ch, true) }

func (m *Metrics) describe(ch chan<- *prometheus.Desc, unlabelled bool) {
	ch <- m.desc(errorMetric, unlabelled)
	ch <- m.desc(okMetric, unlabelled)
	for _, x := range reportMetrics {
		ch <- m.desc(x, unlabelled)
	}
}

func (m *Metrics) collect(ch chan<- prometheus.Metric, unlabelled bool) {
	m.mu.Lock()
	rep, err, set := m.rep, m.err, m.set
	m.mu.Unlock()
	if !set {
		return
	}
	gauge := func(x metric, v float64) {
		ch <- prometheus.MustNewConstMetric(m.desc(x, unlabelled), prometheus.GaugeValue, v)
	}
	gauge(errorMetric, b2f(err != nil))
	gauge(okMetric, b2f(err == nil && rep != nil && rep.OK() && (rep.Rows > 0 || m.AllowEmpty)))
	if err != nil || rep == nil {
		return
	}
	for _, x := range reportMetrics {
		gauge(x, x.value(rep))
	}
}
