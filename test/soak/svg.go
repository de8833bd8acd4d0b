package main

import (
	"bytes"
	"fmt"
	"html"
	"time"
)

// svg plots the leading relay's RSS and goroutines, the backlog (rows
// committed but not yet delivered) and the p99 commit-to-receive latency
// over time, one panel each, with a dashed line at every fault.
func (st *stats) svg() []byte {
	const (
		width, panelH, left, right, top, gap = 900, 150, 70, 20, 30, 40
	)
	panels := []struct {
		title string
		value func(r *row) float64
	}{
		{"leading relay RSS (MiB)", func(r *row) float64 { return float64(r.leaderRSS) / (1 << 20) }},
		{"leading relay goroutines", func(r *row) float64 { return float64(r.leaderGoroutines) }},
		{"backlog: rows committed, not yet delivered", func(r *row) float64 { return float64(r.backlog) }},
		{"p99 commit to receive (ms)", func(r *row) float64 { return float64(r.p99) / 1e6 }},
	}
	height := top + len(panels)*(panelH+gap)
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	var end time.Duration
	if n := len(st.rows); n > 0 {
		end = st.rows[n-1].at
	}
	if end <= 0 {
		end = time.Second
	}
	x := func(at time.Duration) float64 { return left + float64(at)/float64(end)*(width-left-right) }
	for i, p := range panels {
		y0 := float64(top + i*(panelH+gap))
		maxV := 0.0
		for j := range st.rows {
			maxV = max(maxV, p.value(&st.rows[j]))
		}
		if maxV == 0 {
			maxV = 1
		}
		maxV *= 1.1
		y := func(v float64) float64 { return y0 + panelH - v/maxV*panelH }
		fmt.Fprintf(&b, `<text x="%d" y="%.0f">%s</text>`+"\n", left, y0-8, html.EscapeString(p.title))
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", left, y0, width-left-right, panelH)
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" text-anchor="end">%.4g</text>`+"\n", left-5, y0+10, maxV)
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" text-anchor="end">0</text>`+"\n", left-5, y0+panelH)
		for _, f := range st.faults {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#d62728" stroke-dasharray="3,3"><title>%s</title></line>`+"\n",
				x(f.at), x(f.at), y0, y0+panelH, html.EscapeString(f.name))
		}
		b.WriteString(`<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="`)
		for j := range st.rows {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(st.rows[j].at), y(p.value(&st.rows[j])))
		}
		b.WriteString(`"/>` + "\n")
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s (dashed: faults)</text>`+"\n", width-right, height-8, end)
	b.WriteString("</svg>\n")
	return b.Bytes()
}
