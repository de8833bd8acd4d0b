package promopts_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/promopts"
)

// Every collector is named namespace_subsystem_name, with its help, its
// labels and its buckets.
func TestSubsystemNames(t *testing.T) {
	t.Parallel()
	s := promopts.Subsystem{Namespace: "pgoutbox", Subsystem: "test"}
	reg := prometheus.NewRegistry()
	cv := s.CounterVec("events_total", "Events.", "topic")
	cv.WithLabelValues("a").Inc()
	gv := s.GaugeVec("lag", "Lag.", "slot", "reason")
	gv.WithLabelValues("s", "r").Set(1)
	reg.MustRegister(s.Counter("errors_total", "Errors."), cv, s.Gauge("in_flight", "In flight."), gv,
		s.Histogram("duration_seconds", []float64{1, 2}, "Duration."))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		var labels []string
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName())
			}
			if h := m.GetHistogram(); h != nil {
				labels = append(labels, "buckets="+strings.Repeat("b", len(h.GetBucket())))
			}
		}
		got = append(got, mf.GetName()+" "+mf.GetType().String()+" "+mf.GetHelp()+" "+strings.Join(labels, ","))
	}
	want := []string{
		"pgoutbox_test_duration_seconds HISTOGRAM Duration. buckets=bb",
		"pgoutbox_test_errors_total COUNTER Errors. ",
		"pgoutbox_test_events_total COUNTER Events. topic",
		"pgoutbox_test_in_flight GAUGE In flight. ",
		"pgoutbox_test_lag GAUGE Lag. reason,slot", // labels gathered sorted
	}
	if !slices.Equal(got, want) {
		t.Errorf("gathered\n%q\nwant\n%q", got, want)
	}
}
