package inbox_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// metricValue is testenv's.
var metricValue = testenv.MetricValue

// Consumers share a Registerer, told apart by the consumer label; a second
// Inbox of the same consumer on it is refused with the registration error.
func TestMetricsRegistration(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	for _, name := range []string{"billing", "shipping"} {
		if _, err := inbox.New(inbox.Pgx(beginnerStub{}), &inbox.Config{Consumer: name, Registerer: reg}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	_, err := inbox.New(inbox.Pgx(beginnerStub{}), &inbox.Config{Consumer: "billing", Registerer: reg})
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
