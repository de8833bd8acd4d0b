package devdemo

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// figures is what one status line of `relay dev` shows. Published comes
// from the relay's metrics, consumed and duplicates from the inbox's.
type figures struct {
	written, published, consumed, duplicates int64
}

// counts reads the counters.
func (d *demo) counts() figures {
	c := figures{written: d.written.Load()}
	mfs, err := d.reg.Gather()
	if err != nil {
		return c
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			v := int64(m.GetCounter().GetValue())
			switch mf.GetName() {
			case "pgoutbox_relay_events_published_total":
				if labels["topic"] == Topic {
					c.published += v
				}
			case "pgoutbox_inbox_messages_total":
				switch labels["outcome"] {
				case "processed":
					c.consumed += v
				case "duplicate":
					c.duplicates += v
				}
			}
		}
	}
	return c
}

// drained reports whether everything written was published and consumed.
func (c figures) drained() bool {
	return c.published >= c.written && c.consumed >= c.written
}

// printStatus prints one status line. The lag is the events written and
// not yet published, and the slot's WAL lag (current WAL minus the
// confirmed position, which the relay reports every second).
func (d *demo) printStatus(ctx context.Context, out io.Writer, elapsed time.Duration) {
	c := d.counts()
	lag := "?"
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if st, err := relay.Status(sctx, d.relayCfg); err == nil {
		lag = cliutil.ByteCount(st.LagBytes)
	}
	fmt.Fprintf(out, "[%4ds] written %d  published %d  consumed %d  duplicates suppressed %d  lag %d events, %s WAL\n",
		int(elapsed.Round(time.Second).Seconds()), c.written, c.published, c.consumed, c.duplicates,
		max(c.written-c.published, 0), lag)
}

// waitDrained prints status lines until everything written was published
// and consumed, ctx ends or timeout passes.
func (d *demo) waitDrained(ctx context.Context, out io.Writer, start time.Time, timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	line := time.NewTicker(time.Second)
	defer line.Stop()
	for !d.counts().drained() {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		case <-line.C:
			d.printStatus(ctx, out, time.Since(start))
		case <-poll.C:
		}
	}
	d.printStatus(ctx, out, time.Since(start))
}

// summary is the final tally of `relay dev`, from the counters and from
// the database.
type summary struct {
	figures
	orders          int64 // rows in orders
	shipments       int64 // rows in shipments
	shippedOrders   int64 // distinct orders in shipments
	doubleShipments int64 // shipments beyond the first of an order
	missing         int64 // orders without a shipment
}

// ok is true when every order was published and shipped exactly once.
func (s summary) ok() bool {
	return s.orders == s.written && s.published == s.written && s.consumed == s.written &&
		s.shipments == s.written && s.doubleShipments == 0 && s.missing == 0
}

// String is the summary line; tests parse its key=value fields.
func (s summary) String() string {
	result := "ok"
	if !s.ok() {
		result = "inconsistent"
	}
	return fmt.Sprintf("summary: written=%d published=%d consumed=%d duplicates=%d shipments=%d double_shipments=%d missing=%d result=%s",
		s.written, s.published, s.consumed, s.duplicates, s.shipments, s.doubleShipments, s.missing, result)
}

func (d *demo) summarize(ctx context.Context) (summary, error) {
	s := summary{figures: d.counts()}
	err := d.pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM `+Schema+`.orders),
		       (SELECT count(*) FROM `+Schema+`.shipments),
		       (SELECT count(DISTINCT order_id) FROM `+Schema+`.shipments),
		       (SELECT count(*) FROM `+Schema+`.orders o
		         WHERE NOT EXISTS (SELECT 1 FROM `+Schema+`.shipments s WHERE s.order_id = o.id))`).
		Scan(&s.orders, &s.shipments, &s.shippedOrders, &s.missing)
	if err != nil {
		return s, fmt.Errorf("summary: %w", err)
	}
	s.doubleShipments = s.shipments - s.shippedOrders
	return s, nil
}
