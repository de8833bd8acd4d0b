package main

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"time"
)

// series is one line of a panel.
type series struct {
	label, colour string
	value         func(r *row) float64
}

// svg plots, over time, the relays' RSS and goroutines, the lag (how long
// the oldest committed row not yet delivered had waited, the interval's
// highest) and the p99 commit-to-receive latency, one panel each. Every
// fault is a dashed red line with its number; the legend under the panels
// names them.
func (st *stats) svg() []byte {
	const (
		width, panelH, left, right, top, gap = 960, 150, 70, 20, 40, 55
	)
	leader, standby := "#1f77b4", "#ff7f0e"
	panels := []struct {
		title string
		lines []series
		ref   float64 // a dashed reference line, 0 for none
		gaps  bool    // 0 means not sampled
	}{
		{"relay RSS (MiB)", []series{
			{"leader", leader, func(r *row) float64 { return float64(r.leaderRSS) / (1 << 20) }},
			{"standby", standby, func(r *row) float64 { return float64(r.standbyRSS) / (1 << 20) }}}, 0, true},
		{"relay goroutines", []series{
			{"leader", leader, func(r *row) float64 { return float64(r.leaderGoroutines) }},
			{"standby", standby, func(r *row) float64 { return float64(r.standbyGoroutines) }}}, 0, true},
		{"lag (s): the oldest committed row not yet delivered, highest in each interval; dashed: 1 s", []series{
			{"", leader, func(r *row) float64 { return r.maxLag.Seconds() }}}, lagTarget.Seconds(), false},
		{"p99 commit → inbox receive (ms), each interval's first deliveries", []series{
			{"", leader, func(r *row) float64 { return float64(r.p99) / 1e6 }}}, 0, true},
	}
	legendLines := (len(st.faults) + 3) / 4
	height := top + len(panels)*(panelH+gap) + 16*legendLines + 10
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
	plotW := float64(width - left - right)
	x := func(at time.Duration) float64 { return left + float64(at)/float64(end)*plotW }
	step := tickStep(end)
	for i, p := range panels {
		y0 := float64(top + i*(panelH+gap))
		maxV := p.ref
		for _, l := range p.lines {
			for j := range st.rows {
				maxV = max(maxV, l.value(&st.rows[j]))
			}
		}
		maxV = niceCeil(maxV * 1.05)
		y := func(v float64) float64 { return y0 + panelH - v/maxV*panelH }
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="bold">%s</text>`+"\n", left, y0-8, html.EscapeString(p.title))
		// Grid and axes.
		for k := 0; k <= 4; k++ {
			v := maxV * float64(k) / 4
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", left, width-right, y(v), y(v))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-5, y(v)+4, fmtTick(v))
		}
		for at := time.Duration(0); at <= end; at += step {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#eee"/>`+"\n", x(at), x(at), y0, y0+panelH)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", x(at), y0+panelH+14, fmtMinutes(at))
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", left, y0, width-left-right, panelH)
		if p.ref > 0 {
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#2ca02c" stroke-dasharray="6,3"/>`+"\n", left, width-right, y(p.ref), y(p.ref))
		}
		for n, f := range st.faults {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#d62728" stroke-opacity="0.6" stroke-dasharray="3,3"><title>%s</title></line>`+"\n",
				x(f.at), x(f.at), y0, y0+panelH, html.EscapeString(f.name))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" font-size="9" fill="#d62728">%d</text>`+"\n", x(f.at), y0+9, n+1)
		}
		for k, l := range p.lines {
			// A relay not sampled (being replaced, or neither relay
			// leading) leaves a gap, not a drop to 0.
			open := false
			for j := range st.rows {
				v := l.value(&st.rows[j])
				if p.gaps && v == 0 {
					if open {
						b.WriteString(`"/>` + "\n")
						open = false
					}
					continue
				}
				if !open {
					b.WriteString(`<polyline fill="none" stroke="` + l.colour + `" stroke-width="1.5" points="`)
					open = true
				}
				fmt.Fprintf(&b, "%.1f,%.1f ", x(st.rows[j].at), y(v))
			}
			if open {
				b.WriteString(`"/>` + "\n")
			}
			if l.label != "" {
				lx := width - right - 130 + k*65
				fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="2"/><text x="%d" y="%.0f">%s</text>`+"\n",
					lx, lx+15, y0-12, y0-12, l.colour, lx+19, y0-8, l.label)
			}
		}
	}
	// The legend: the faults by number.
	ly := top + len(panels)*(panelH+gap) - gap + 36
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#d62728">faults (dashed red lines; minutes:seconds of the run):</text>`+"\n", left, ly)
	for n, f := range st.faults {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11">%d  %s  %s</text>`+"\n",
			left+(n%4)*((width-left-right)/4), ly+16*(n/4+1), n+1, fmtMinutes(f.at), html.EscapeString(f.name))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// tickStep is a round time step giving 4 to 12 ticks over end.
func tickStep(end time.Duration) time.Duration {
	for _, s := range []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute} {
		if end/s <= 12 {
			return s
		}
	}
	return time.Hour
}

// niceCeil rounds v up to a round number (1 for v <= 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func fmtTick(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func fmtMinutes(d time.Duration) string {
	s := int(d.Seconds())
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
