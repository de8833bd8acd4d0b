package deploy

import (
	"database/sql"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/internal/verify"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// recorder is a Registerer that keeps what is registered on it.
type recorder struct{ collectors []prometheus.Collector }

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}

func (r *recorder) Unregister(prometheus.Collector) bool { return true }

var fqName = regexp.MustCompile(`fqName: "([a-z0-9_]+)"`)

// names returns the metric names the collectors describe. Describe lists
// vectors even before they have a labelled child.
func (r *recorder) names(t *testing.T) map[string]bool {
	t.Helper()
	out := make(map[string]bool)
	ch := make(chan *prometheus.Desc)
	go func() {
		for _, c := range r.collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	for d := range ch {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		out[m[1]] = true
	}
	return out
}

// registered returns every metric name the relay and the inbox register.
func registered(t *testing.T) map[string]bool {
	t.Helper()
	rec := &recorder{}
	if _, err := relay.New(&relay.Config{DatabaseURL: "postgres://localhost/db", Kafka: relay.KafkaConfig{Brokers: []string{"localhost:9092"}}, Registerer: rec}); err != nil {
		t.Fatal(err)
	}
	if _, err := inbox.New(inbox.SQL(&sql.DB{}), &inbox.Config{Consumer: "deploy-test", Registerer: rec}); err != nil {
		t.Fatal(err)
	}
	names := rec.names(t)
	if len(names) < 20 {
		t.Fatalf("only %d metrics registered: %v", len(names), names)
	}
	return names
}

var queried = regexp.MustCompile(`pgoutbox_[a-z0-9_]+`)

func TestDeployFilesQueryRegisteredMetrics(t *testing.T) {
	names := registered(t)
	// relay verify's gauges and relay run --config's fleet gauge may be
	// queried too (their alerts); they are not required on a panel.
	rec := &recorder{}
	rec.MustRegister(verify.NewMetrics("public.outbox"), relaymetrics.NewFleetSourceRunning())
	verifyNames := rec.names(t)
	files := []string{
		"../../deploy/grafana/pgoutbox.json",
		"../../deploy/prometheus/alerts.yml",
	}
	used := make(map[string]bool)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range queried.FindAllString(string(b), -1) {
			base := m
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if trimmed, ok := strings.CutSuffix(m, suffix); ok && names[trimmed] {
					base = trimmed
				}
			}
			used[base] = true
			if !names[base] && !verifyNames[base] {
				t.Errorf("%s queries %s, which neither the relay nor the inbox registers", filepath.Base(f), m)
			}
		}
	}
	// The other direction: a metric no panel shows is worth knowing about.
	var unshown []string
	for n := range names {
		if !used[n] {
			unshown = append(unshown, n)
		}
	}
	sort.Strings(unshown)
	if len(unshown) > 0 {
		t.Errorf("metrics on no dashboard panel or alert: %v", unshown)
	}
}
