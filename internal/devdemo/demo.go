package devdemo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// demo is the producer and consumer side of `relay dev`.
type demo struct {
	pool     *pgxpool.Pool
	opts     Options
	log      *slog.Logger
	reg      *prometheus.Registry
	relayCfg *relay.Config
	inbox    *inbox.Inbox[pgx.Tx]

	written  atomic.Int64 // orders committed by the producer
	prepared bool         // the schema and slot exist and must be cleaned up

	mu       sync.Mutex
	consumed []inbox.Message // recently processed messages, for redelivery
}

// recentCap bounds the messages kept for redelivery.
const recentCap = 1000

// prepare (re)creates the demo's schema, tables and relay objects. A
// leftover of an earlier run against the same server is dropped first.
func (d *demo) prepare(ctx context.Context) error {
	if err := relay.Teardown(ctx, d.relayCfg); err != nil {
		if errors.Is(err, relaytype.ErrSlotActive) {
			return fmt.Errorf("slot %s is in use: is another relay dev running on this server?", slot)
		}
		return err
	}
	d.prepared = true
	if err := dropDevSchema(ctx, d.pool); err != nil {
		return err
	}
	ddl := `CREATE SCHEMA ` + Schema + `;
		CREATE TABLE ` + Schema + `.orders (
			id           text PRIMARY KEY,
			amount_cents bigint NOT NULL,
			placed_at    timestamptz NOT NULL DEFAULT now());
		CREATE TABLE ` + Schema + `.shipments (
			order_id   text NOT NULL, -- no unique key: a double shipment must be visible, not an error
			message_id text NOT NULL,
			shipped_at timestamptz NOT NULL DEFAULT now())`
	if _, err := d.pool.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("create demo tables: %w", err)
	}
	if _, err := inbox.Migrate(ctx, inbox.Pgx(d.pool), Schema+".inbox"); err != nil {
		return err
	}
	return relay.Setup(ctx, d.relayCfg)
}

// dropDevSchema drops the demo schema and forgets its migrations.
func dropDevSchema(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+Schema+` CASCADE;
		DO $$ BEGIN
			IF to_regclass('public.pgoutbox_migration') IS NOT NULL THEN
				DELETE FROM public.pgoutbox_migration WHERE target LIKE '`+Schema+`.%';
			END IF;
		END $$`)
	if err != nil {
		return fmt.Errorf("drop schema %s: %w", Schema, err)
	}
	return nil
}

// cleanup drops the slot and the publication, and the schema unless
// --keep, when the demo ran on a server it did not start (a throwaway
// server goes as a whole).
func (d *demo) cleanup(ctx context.Context) error {
	if !d.prepared || d.opts.DatabaseURL == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := relay.Teardown(ctx, d.relayCfg)
	if !d.opts.Keep {
		err = errors.Join(err, dropDevSchema(ctx, d.pool))
	}
	return err
}

// produce places opts.Rate orders per second until ctx ends.
func (d *demo) produce(ctx context.Context) error {
	w, err := outbox.NewWriter(outbox.Pgx(d.pool), &outbox.Config{Table: Schema + ".outbox"})
	if err != nil {
		return err
	}
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		due := int(time.Since(start).Seconds() * float64(d.opts.Rate))
		for ; n < due && ctx.Err() == nil; n++ {
			// Not cancelled midway: a commit whose outcome is unknown
			// would make the written count uncertain.
			if err := d.placeOrder(context.WithoutCancel(ctx), w, n+1); err != nil {
				return fmt.Errorf("producer: %w", err)
			}
			d.written.Add(1)
		}
	}
}

// orderPlaced is the demo's event payload.
type orderPlaced struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
}

// placeOrder writes order n and its event in one transaction.
func (d *demo) placeOrder(ctx context.Context, w *outbox.Writer[pgx.Tx], n int) error {
	ev := orderPlaced{OrderID: fmt.Sprintf("order-%07d", n), AmountCents: int64(500 + n*37%10000)}
	payload, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO `+Schema+`.orders (id, amount_cents) VALUES ($1, $2)`, ev.OrderID, ev.AmountCents); err != nil {
			return err
		}
		_, err := w.InsertTx(ctx, tx, outbox.Message{
			AggregateType: "order",
			AggregateID:   ev.OrderID,
			EventType:     "order.placed",
			BusinessKey:   "ship-" + ev.OrderID,
			Payload:       payload,
		})
		return err
	})
}

// ship is the consumer's handler: one shipment per order, in the inbox's
// transaction.
func (d *demo) ship(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
	var ev orderPlaced
	if err := json.Unmarshal(msg.Payload, &ev); err != nil || ev.OrderID == "" {
		return "", inbox.Permanent(fmt.Errorf("bad order.placed payload: %v", err))
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+Schema+`.shipments (order_id, message_id) VALUES ($1, $2)`, ev.OrderID, msg.ID); err != nil {
		return "", err
	}
	return "shipment:" + ev.OrderID, nil
}

// remember keeps processed messages for redeliverLoop.
func (d *demo) remember(msg inbox.Message, res inbox.Result) {
	if res.Outcome != inbox.Processed || d.opts.Redeliver == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.consumed) == recentCap {
		d.consumed = d.consumed[1:]
	}
	d.consumed = append(d.consumed, msg)
}

// redeliverLoop hands opts.Redeliver already consumed messages back to the
// inbox every second, as Kafka redelivers after a consumer died between its
// database commit and its offset commit. The inbox must answer Duplicate.
func (d *demo) redeliverLoop(ctx context.Context) error {
	if d.opts.Redeliver == 0 {
		return nil
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for _, msg := range d.pick(d.opts.Redeliver) {
			// Short, and not cut off midway: a delivery is settled or not.
			res, err := d.inbox.Process(context.WithoutCancel(ctx), msg, func(ctx context.Context, tx pgx.Tx, _ inbox.Message) (string, error) {
				return d.ship(ctx, tx, msg)
			})
			if err != nil {
				return fmt.Errorf("redeliver %s: %w", msg.ID, err)
			}
			if res.Outcome != inbox.Duplicate {
				d.log.Error("redelivered message was not a duplicate", "message_id", msg.ID, "outcome", res.Outcome.String())
			}
		}
	}
}

// pick returns up to n random remembered messages.
func (d *demo) pick(n int) []inbox.Message {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []inbox.Message
	for i := 0; i < n && len(d.consumed) > 0; i++ {
		out = append(out, d.consumed[rand.N(len(d.consumed))])
	}
	return out
}
