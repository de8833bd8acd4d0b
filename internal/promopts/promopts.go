package promopts

import "github.com/prometheus/client_golang/prometheus"

// Subsystem names the collectors it builds Namespace_Subsystem_name.
type Subsystem struct {
	Namespace, Subsystem string
}

// Counter is a counter of the subsystem.
func (s Subsystem) Counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: s.Namespace, Subsystem: s.Subsystem, Name: name, Help: help})
}

// CounterVec is a counter of the subsystem with labels.
func (s Subsystem) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: s.Namespace, Subsystem: s.Subsystem, Name: name, Help: help}, labels)
}

// Gauge is a gauge of the subsystem.
func (s Subsystem) Gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: s.Namespace, Subsystem: s.Subsystem, Name: name, Help: help})
}

// GaugeVec is a gauge of the subsystem with labels.
func (s Subsystem) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: s.Namespace, Subsystem: s.Subsystem, Name: name, Help: help}, labels)
}

// Histogram is a histogram of the subsystem with buckets.
func (s Subsystem) Histogram(name string, buckets []float64, help string) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: s.Namespace, Subsystem: s.Subsystem, Name: name, Help: help, Buckets: buckets})
}
