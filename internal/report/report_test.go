package report_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/report"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// The verdict names what is wrong, and tells an empty window from a clean
// one.
func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		r    relaytype.VerifyReport
		want string
	}{
		{relaytype.VerifyReport{}, "empty (no outbox rows in the window)"},
		{relaytype.VerifyReport{Rows: 3, Found: 3}, "ok"},
		{relaytype.VerifyReport{Rows: 3, Missing: 1, OrderBreaks: 2}, "1 rows missing, 2 order breaks"},
		{relaytype.VerifyReport{Rows: 3, Mismatched: 1}, "1 records mismatched"},
	} {
		if got := report.Verdict(&tc.r); got != tc.want {
			t.Errorf("Verdict(%+v) = %q, want %q", tc.r, got, tc.want)
		}
	}
}

// A fleet's source gets a "source NAME" line in text and a one-line
// {"source", "report"} object in JSON; a single relay gets neither, and
// indented JSON.
func TestVerifyTextAndJSON(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &relaytype.VerifyReport{From: at, To: at.Add(time.Hour), Rows: 2, Found: 1, Missing: 1,
		MissingRows: []relaytype.VerifyMissingRow{{ID: "id-1", Topic: "orders", CreatedAt: at}}}
	var b bytes.Buffer
	report.Verify(&b, "alpha", "public.outbox", r)
	for _, want := range []string{"source alpha\n", "window:        2026-01-02T03:04:05Z .. 2026-01-02T04:04:05Z (public.outbox)\n",
		"  id-1  topic orders  created 2026-01-02T03:04:05Z  committed unknown (track_commit_timestamp off)\n", "verdict:       1 rows missing\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	report.Verify(&b, "", "public.outbox", r)
	if strings.Contains(b.String(), "source") {
		t.Errorf("a single relay's report names a source:\n%s", b.String())
	}

	b.Reset()
	if err := report.VerifyJSON(&b, "alpha", r); err != nil {
		t.Fatal(err)
	}
	var line struct {
		Source string                 `json:"source"`
		Report relaytype.VerifyReport `json:"report"`
	}
	if strings.Count(b.String(), "\n") != 1 || json.Unmarshal(b.Bytes(), &line) != nil || line.Source != "alpha" || line.Report.Missing != 1 {
		t.Errorf("fleet JSON %q, want one line with source alpha and its report", b.String())
	}
	b.Reset()
	if err := report.VerifyJSON(&b, "", r); err != nil {
		t.Fatal(err)
	}
	var single relaytype.VerifyReport
	if !strings.Contains(b.String(), "\n  \"") || json.Unmarshal(b.Bytes(), &single) != nil || single.Rows != 2 {
		t.Errorf("single JSON %q, want the report indented", b.String())
	}
}

// The status table has a row per fact; a fleet's sources are each under
// their name, and the unreadable and unhealthy ones are named with why.
func TestStatusAndSources(t *testing.T) {
	pid := int32(42)
	ok := &relaytype.SlotStatus{Slot: "s1", Publication: "p1", Table: "public.outbox", SlotExists: true, PublicationExists: true,
		Active: true, ActivePID: &pid, ActiveClientAddr: "10.0.0.1", WALStatus: "reserved"}
	sick := &relaytype.SlotStatus{Slot: "s2", Publication: "p2", Table: "public.outbox", Problems: []string{"slot s2 is missing"}}
	var b bytes.Buffer
	if err := report.Status(&b, ok); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"slot                 s1 (exists)\n", "active               yes, pid 42\n",
		"active_process       (no application_name) from 10.0.0.1\n", "safe_wal_size        unlimited\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status table lacks %q:\n%s", want, b.String())
		}
	}
	if report.Unhealthy(ok) != nil || report.Unhealthy(sick) == nil || report.Unhealthy(sick).Error() != "slot s2 is missing" {
		t.Errorf("Unhealthy: %v, %v", report.Unhealthy(ok), report.Unhealthy(sick))
	}

	sources := []report.Source{{Name: "a", Status: ok}, {Name: "b", Status: sick}, {Name: "c", Error: "database unreachable"}}
	b.Reset()
	bad, err := report.Sources(&b, false, sources)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"b (slot s2 is missing)", "c (database unreachable)"}
	if strings.Join(bad, "; ") != strings.Join(want, "; ") {
		t.Errorf("bad = %q, want %q", bad, want)
	}
	for _, want := range []string{"source a\nslot ", "\n\nsource b\n", "\n\nsource c\nerror  database unreachable\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("fleet status lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if bad, err = report.Sources(&b, true, sources); err != nil || len(bad) != 2 {
		t.Fatalf("JSON: bad %q, err %v", bad, err)
	}
	var doc struct {
		Sources []report.Source `json:"sources"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil || len(doc.Sources) != 3 || doc.Sources[2].Error != "database unreachable" {
		t.Errorf("JSON %s: %v", b.String(), err)
	}
}

// A push goes to the job's group of the table (and source), with basic
// auth; a gateway's long answer to a failed push is cut short in the
// error.
func TestPusher(t *testing.T) {
	var path, user, password string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		path = r.URL.Path
		user, password, _ = r.BasicAuth()
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, strings.Repeat("x", 5000))
	}))
	defer srv.Close()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "pgoutbox_verify_test"})
	p := report.NewPusher(report.PushTarget{URL: srv.URL, Job: "j", Table: "public.outbox", Source: "alpha", User: "u", Password: "pw"}, g)
	err := p.Push(context.Background())
	if err == nil {
		t.Fatal("a push answered 500 succeeded")
	}
	if strings.Contains(err.Error(), strings.Repeat("x", 513)) || !strings.Contains(err.Error(), "xxx") {
		t.Errorf("the error quotes %d bytes of the answer, want at most 512", strings.Count(err.Error(), "x"))
	}
	// The client keeps the grouping labels in a map: their order in the
	// path varies from push to push, and means nothing to the gateway.
	if !slices.Contains([]string{"/metrics/job/j/table/public.outbox/source/alpha", "/metrics/job/j/source/alpha/table/public.outbox"}, path) ||
		user != "u" || password != "pw" {
		t.Errorf("pushed to %q as %q:%q", path, user, password)
	}
}
