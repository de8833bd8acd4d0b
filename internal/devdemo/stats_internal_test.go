package devdemo

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// counts reads what it shows from the registry: the relay's publications
// to the demo topic only (not the dead-letter topic), and the inbox's
// processed and duplicate outcomes (not its other outcomes).
func TestCounts(t *testing.T) {
	t.Parallel()
	d := &demo{reg: prometheus.NewRegistry()}
	published := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pgoutbox_relay_events_published_total"}, []string{"topic"})
	messages := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pgoutbox_inbox_messages_total"}, []string{"outcome", "topic"})
	other := prometheus.NewCounter(prometheus.CounterOpts{Name: "pgoutbox_other_total"})
	d.reg.MustRegister(published, messages, other)
	published.WithLabelValues(Topic).Add(7)
	published.WithLabelValues(relayDLQ).Add(100)
	messages.WithLabelValues("processed", Topic).Add(5)
	messages.WithLabelValues("processed", "elsewhere").Add(1)
	messages.WithLabelValues("duplicate", Topic).Add(3)
	messages.WithLabelValues("retry", Topic).Add(50)
	other.Add(1000)
	d.written.Store(8)

	got := d.counts()
	if want := (figures{written: 8, published: 7, consumed: 6, duplicates: 3}); got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
	if got.drained() {
		t.Error("drained with 7 of 8 published")
	}
	published.WithLabelValues(Topic).Inc()
	messages.WithLabelValues("processed", Topic).Add(2)
	if c := d.counts(); !c.drained() {
		t.Errorf("not drained at %+v", c)
	}
}

// A summary is ok only when every order was written, published, consumed
// and shipped once; its line says which.
func TestSummary(t *testing.T) {
	t.Parallel()
	good := summary{figures: figures{written: 10, published: 10, consumed: 10, duplicates: 4}, orders: 10, shipments: 10, shippedOrders: 10}
	if !good.ok() || !strings.HasSuffix(good.String(), " result=ok") {
		t.Fatalf("%s: want ok", good)
	}
	if want := "summary: written=10 published=10 consumed=10 duplicates=4 shipments=10 double_shipments=0 missing=0 result=ok"; good.String() != want {
		t.Errorf("String = %q, want %q", good.String(), want)
	}
	for _, tc := range []struct {
		name  string
		spoil func(*summary)
	}{
		{"order lost before commit", func(s *summary) { s.orders = 9 }},
		{"not all published", func(s *summary) { s.published = 9 }},
		{"not all consumed", func(s *summary) { s.consumed = 9 }},
		{"a shipment missing", func(s *summary) { s.shipments, s.missing = 9, 1 }},
		{"shipped twice", func(s *summary) { s.shipments, s.doubleShipments = 11, 1 }},
	} {
		s := good
		tc.spoil(&s)
		if s.ok() || !strings.HasSuffix(s.String(), " result=inconsistent") {
			t.Errorf("%s: %s, want inconsistent", tc.name, s)
		}
	}
}

// remember keeps the last recentCap processed messages, and only when
// redelivery is on; pick draws from them.
func TestRememberAndPick(t *testing.T) {
	t.Parallel()
	off := &demo{}
	off.remember(inbox.Message{ID: "a"}, inbox.Result{Outcome: inbox.Processed})
	if got := off.pick(3); len(got) != 0 {
		t.Errorf("Redeliver 0 remembered %v", got)
	}

	d := &demo{opts: Options{Redeliver: 2}}
	if got := d.pick(2); len(got) != 0 {
		t.Errorf("pick of nothing = %v", got)
	}
	d.remember(inbox.Message{ID: "dup"}, inbox.Result{Outcome: inbox.Duplicate})
	for i := range recentCap + 5 {
		d.remember(inbox.Message{ID: fmt.Sprint(i)}, inbox.Result{Outcome: inbox.Processed})
	}
	if len(d.consumed) != recentCap || d.consumed[0].ID != "5" || d.consumed[recentCap-1].ID != fmt.Sprint(recentCap+4) {
		t.Fatalf("kept %d messages, %s to %s; want the last %d", len(d.consumed), d.consumed[0].ID, d.consumed[len(d.consumed)-1].ID, recentCap)
	}
	got := d.pick(3)
	if len(got) != 3 {
		t.Fatalf("pick(3) = %d messages", len(got))
	}
	for _, m := range got {
		if m.ID == "dup" {
			t.Errorf("picked %q, not a remembered processed message", m.ID)
		}
	}
}
