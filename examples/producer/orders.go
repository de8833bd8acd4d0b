package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// service places orders.
type service struct {
	pool   *pgxpool.Pool
	outbox *outbox.Writer[pgx.Tx]
}

func newService(pool *pgxpool.Pool) (*service, error) {
	w, err := outbox.NewWriter(outbox.Pgx(pool), nil) // public.outbox
	if err != nil {
		return nil, err
	}
	return &service{pool: pool, outbox: w}, nil
}

// migrate creates the outbox table and the service's own orders table.
func (s *service) migrate(ctx context.Context) error {
	if _, err := outbox.Migrate(ctx, outbox.Pgx(s.pool), ""); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS orders (
		id           uuid PRIMARY KEY,
		customer     text NOT NULL,
		amount_cents bigint NOT NULL CHECK (amount_cents > 0),
		placed_at    timestamptz NOT NULL DEFAULT now())`)
	return err
}

// Order is the request body of POST /orders and the payload of the
// order.placed event.
type Order struct {
	ID          string `json:"order_id"`
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amount_cents"`
}

// errBadOrder marks a request the service refuses.
var errBadOrder = errors.New("bad order")

// placeOrder writes the order and its order.placed event in one
// transaction: both commit, or neither does.
func (s *service) placeOrder(ctx context.Context, o Order) (Order, error) {
	if o.Customer == "" || o.AmountCents <= 0 {
		return o, fmt.Errorf("%w: customer and a positive amount_cents are required", errBadOrder)
	}
	o.ID = uuid.NewString()
	payload, err := json.Marshal(o)
	if err != nil {
		return o, err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO orders (id, customer, amount_cents) VALUES ($1, $2, $3)`,
			o.ID, o.Customer, o.AmountCents); err != nil {
			return err
		}
		_, err := s.outbox.InsertTx(ctx, tx, outbox.Message{
			AggregateType: "order", // topic outbox.order
			AggregateID:   o.ID,    // Kafka key: events of one order stay in order
			EventType:     "order.placed",
			BusinessKey:   "charge-" + o.ID, // the payment's idempotency key downstream
			Payload:       payload,
		})
		return err
	})
	return o, err
}

func (s *service) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		var o Order
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&o); err != nil {
			http.Error(w, "invalid JSON: "+err.Error(), http.StatusBadRequest)
			return
		}
		o, err := s.placeOrder(r.Context(), o)
		switch {
		case errors.Is(err, errBadOrder):
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		case err != nil:
			http.Error(w, "could not place the order", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(o)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := s.pool.Ping(r.Context()); err != nil {
			http.Error(w, "database unreachable", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// generate places a random order every interval until ctx ends, so that a
// docker-compose stack has traffic without anyone calling the API.
func (s *service) generate(ctx context.Context, every time.Duration, log *slog.Logger) {
	customers := []string{"ada", "grace", "linus", "barbara", "ken"}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		o, err := s.placeOrder(ctx, Order{Customer: customers[rand.N(len(customers))], AmountCents: 100 + rand.Int64N(20000)})
		if err != nil {
			if ctx.Err() == nil {
				log.Error("place order", "err", err)
			}
			continue
		}
		log.Info("order placed", "order_id", o.ID, "amount_cents", o.AmountCents)
	}
}
