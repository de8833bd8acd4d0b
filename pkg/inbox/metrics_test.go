package inbox_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// metricValue sums the series of metric name (those with label=value when
// label is set): counter and gauge values, histogram sample counts.
func metricValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && !hasLabel(m, label, value) {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// Consumers share a Registerer, told apart by the consumer label; a second
// Inbox of the same consumer on it is refused with the registration error.
func TestMetricsRegistration(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	for _, name := range []string{"billing", "shipping"} {
		if _, err := inbox.New(&inbox.Config{Consumer: name, Registerer: reg}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	_, err := inbox.New(&inbox.Config{Consumer: "billing", Registerer: reg})
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) || !strings.Contains(err.Error(), `"billing"`) {
		t.Fatalf("second billing inbox: %v", err)
	}
	// The shared registry still gathers both consumers' series.
	if got := metricValue(t, reg, "pgoutbox_inbox_messages_total", "consumer", "shipping"); got != 0 {
		t.Fatalf("shipping deliveries %v", got)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, mf := range mfs {
		if mf.GetName() == "pgoutbox_inbox_messages_total" {
			series = len(mf.GetMetric())
		}
	}
	if series != 12 { // 6 outcomes x 2 consumers
		t.Fatalf("%d messages_total series, want 12", series)
	}
}
