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

// panel is one plot of the chart.
type panel struct {
	title string
	lines []series
	ref   float64 // a dashed reference line, 0 for none
	gaps  bool    // 0 means not sampled
}

// The chart's layout, in pixels.
const (
	svgWidth, panelH, svgLeft, svgRight, svgTop, panelGap = 960, 150, 70, 20, 40, 55
)

// chart is an SVG being drawn from st: x maps a time of the run to its
// abscissa.
type chart struct {
	b   bytes.Buffer
	st  *stats
	end time.Duration
	x   func(at time.Duration) float64
}

// svg plots, over time, the relays' RSS and goroutines, the lag (how long
// the oldest committed row not yet delivered had waited, the interval's
// highest) and the p99 commit-to-receive latency, one panel each. Every
// fault is a dashed red line with its number; the legend under the panels
// names them.
func (st *stats) svg() []byte {
	panels := soakPanels()
	legendLines := (len(st.faults) + 3) / 4
	height := svgTop + len(panels)*(panelH+panelGap) + 16*legendLines + 10
	c := &chart{st: st, end: time.Second}
	if n := len(st.rows); n > 0 && st.rows[n-1].at > 0 {
		c.end = st.rows[n-1].at
	}
	plotW := float64(svgWidth - svgLeft - svgRight)
	c.x = func(at time.Duration) float64 { return svgLeft + float64(at)/float64(c.end)*plotW }
	fmt.Fprintf(&c.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", svgWidth, height)
	fmt.Fprintf(&c.b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for i, p := range panels {
		c.panel(float64(svgTop+i*(panelH+panelGap)), p)
	}
	c.legend(svgTop + len(panels)*(panelH+panelGap) - panelGap + 36)
	c.b.WriteString("</svg>\n")
	return c.b.Bytes()
}

// soakPanels are the chart's panels: RSS, goroutines, lag and latency.
func soakPanels() []panel {
	leader, standby := "#1f77b4", "#ff7f0e"
	return []panel{
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
}

// panel draws p with its top at y0: title, grid, reference line, faults
// and its lines.
func (c *chart) panel(y0 float64, p panel) {
	maxV := p.ref
	for _, l := range p.lines {
		for j := range c.st.rows {
			maxV = max(maxV, l.value(&c.st.rows[j]))
		}
	}
	maxV = niceCeil(maxV * 1.05)
	y := func(v float64) float64 { return y0 + panelH - v/maxV*panelH }
	fmt.Fprintf(&c.b, `<text x="%d" y="%.0f" font-weight="bold">%s</text>`+"\n", svgLeft, y0-8, html.EscapeString(p.title))
	c.grid(y0, maxV, y)
	if p.ref > 0 {
		fmt.Fprintf(&c.b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#2ca02c" stroke-dasharray="6,3"/>`+"\n", svgLeft, svgWidth-svgRight, y(p.ref), y(p.ref))
	}
	for n, f := range c.st.faults {
		fmt.Fprintf(&c.b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#d62728" stroke-opacity="0.6" stroke-dasharray="3,3"><title>%s</title></line>`+"\n",
			c.x(f.at), c.x(f.at), y0, y0+panelH, html.EscapeString(f.name))
		fmt.Fprintf(&c.b, `<text x="%.1f" y="%.0f" text-anchor="middle" font-size="9" fill="#d62728">%d</text>`+"\n", c.x(f.at), y0+9, n+1)
	}
	for k, l := range p.lines {
		c.line(l, p.gaps, y)
		if l.label != "" {
			lx := svgWidth - svgRight - 130 + k*65
			fmt.Fprintf(&c.b, `<line x1="%d" x2="%d" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="2"/><text x="%d" y="%.0f">%s</text>`+"\n",
				lx, lx+15, y0-12, y0-12, l.colour, lx+19, y0-8, l.label)
		}
	}
}

// grid draws a panel's horizontal lines up to maxV, its time ticks and
// its frame.
func (c *chart) grid(y0, maxV float64, y func(float64) float64) {
	for k := 0; k <= 4; k++ {
		v := maxV * float64(k) / 4
		fmt.Fprintf(&c.b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", svgLeft, svgWidth-svgRight, y(v), y(v))
		fmt.Fprintf(&c.b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", svgLeft-5, y(v)+4, fmtTick(v))
	}
	step := tickStep(c.end)
	for at := time.Duration(0); at <= c.end; at += step {
		fmt.Fprintf(&c.b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#eee"/>`+"\n", c.x(at), c.x(at), y0, y0+panelH)
		fmt.Fprintf(&c.b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", c.x(at), y0+panelH+14, fmtMinutes(at))
	}
	fmt.Fprintf(&c.b, `<rect x="%d" y="%.0f" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", svgLeft, y0, svgWidth-svgLeft-svgRight, panelH)
}

// line draws l as polylines. With gaps, a relay not sampled (being
// replaced, or neither relay leading) leaves a gap, not a drop to 0.
func (c *chart) line(l series, gaps bool, y func(float64) float64) {
	open := false
	for j := range c.st.rows {
		v := l.value(&c.st.rows[j])
		if gaps && v == 0 {
			if open {
				c.b.WriteString(`"/>` + "\n")
				open = false
			}
			continue
		}
		if !open {
			c.b.WriteString(`<polyline fill="none" stroke="` + l.colour + `" stroke-width="1.5" points="`)
			open = true
		}
		fmt.Fprintf(&c.b, "%.1f,%.1f ", c.x(c.st.rows[j].at), y(v))
	}
	if open {
		c.b.WriteString(`"/>` + "\n")
	}
}

// legend names the faults by number, from ly down.
func (c *chart) legend(ly int) {
	fmt.Fprintf(&c.b, `<text x="%d" y="%d" fill="#d62728">faults (dashed red lines; minutes:seconds of the run):</text>`+"\n", svgLeft, ly)
	for n, f := range c.st.faults {
		fmt.Fprintf(&c.b, `<text x="%d" y="%d" font-size="11">%d  %s  %s</text>`+"\n",
			svgLeft+(n%4)*((svgWidth-svgLeft-svgRight)/4), ly+16*(n/4+1), n+1, fmtMinutes(f.at), html.EscapeString(f.name))
	}
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
