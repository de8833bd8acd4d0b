package main

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"
)

// The chart is well-formed SVG: one dashed red line per fault in each
// panel, the fault names escaped in the legend, and a standby that was
// not sampled (RSS 0) drawn as separate polylines, not a drop to 0.
func TestSVG(t *testing.T) {
	t.Parallel()
	st := newStats()
	for i := range 8 {
		r := row{at: time.Duration(i+1) * 15 * time.Second, leaderRSS: 64 << 20, standbyRSS: 32 << 20,
			leaderGoroutines: 40, standbyGoroutines: 20, maxLag: 300 * time.Millisecond, p99: 5 * time.Millisecond}
		if i == 3 || i == 4 {
			r.standbyRSS = 0 // being replaced
		}
		st.rows = append(st.rows, r)
	}
	st.faults = []faultMark{{at: 20 * time.Second, name: "kill <leader>"}, {at: 70 * time.Second, name: "pause & resume"}}
	out := string(st.svg())

	dec := xml.NewDecoder(strings.NewReader(out))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, out)
		}
	}
	panels := len(soakPanels())
	if n := strings.Count(out, `stroke="#d62728"`); n != panels*len(st.faults) {
		t.Errorf("%d fault lines, want %d (%d panels × %d faults)", n, panels*len(st.faults), panels, len(st.faults))
	}
	for _, want := range []string{"kill &lt;leader&gt;", "pause &amp; resume", "0:20", "1:10"} {
		if !strings.Contains(out, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	// RSS panel: the leader's one polyline, the standby's two around the
	// gap; the other three panels' lines have no gap.
	if n := strings.Count(out, `<polyline fill="none" stroke="#ff7f0e"`); n != 3 {
		t.Errorf("%d standby polylines, want 3 (two RSS around its gap, one goroutines)", n)
	}
	if n := strings.Count(out, `<polyline fill="none" stroke="#1f77b4"`); n != 4 {
		t.Errorf("%d leader polylines, want 4 (one a panel)", n)
	}
}

// An empty run still draws the panels, over one second.
func TestSVGEmpty(t *testing.T) {
	t.Parallel()
	out := string(newStats().svg())
	if !strings.HasSuffix(out, "</svg>\n") || strings.Contains(out, "<polyline") {
		t.Errorf("empty chart:\n%s", out)
	}
}
