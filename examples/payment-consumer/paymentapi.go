package main

import (
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"net/http"
	"sort"
	"sync"
)

// paymentAPI is a fake payment gateway with the one feature that matters
// here: an Idempotency-Key store. A second request with a known key gets
// the first charge back (header Idempotent-Replayed: true) and charges
// nothing. With failEvery = n, every n-th new charge is made but its
// response is lost (503), as when a network or a gateway fails after the
// charge: the caller must retry with the same key.
type paymentAPI struct {
	failEvery int

	mu      sync.Mutex
	charges map[string]*charge // by idempotency key
	created int
	refuse  []int // statuses to answer, without charging, to the next requests

	afterCharge chargeHook // runs after each new charge
}

// chargeHook, when set, runs after a fake API charged and before it
// answers; tests block in it to kill the caller exactly between the
// provider's success and the caller's bookkeeping.
type chargeHook struct {
	mu sync.Mutex
	f  func(r *http.Request, c charge)
}

func (h *chargeHook) set(f func(r *http.Request, c charge)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.f = f
}

func (h *chargeHook) run(r *http.Request, c charge) {
	h.mu.Lock()
	f := h.f
	h.mu.Unlock()
	if f != nil {
		f(r, c)
	}
}

// charge is one charge of the fake APIs.
type charge struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	AmountCents    int64  `json:"amount_cents"`
	Reference      string `json:"reference"`
	// ReservationID is the reservation a confirm charged (noKeyAPI).
	ReservationID string `json:"reservation_id,omitempty"`
	// Requests counts the requests that carried the key.
	Requests int `json:"requests"`
}

// chargeRequest is the body of POST /v1/charges.
type chargeRequest struct {
	AmountCents int64  `json:"amount_cents"`
	Reference   string `json:"reference"`
}

func newPaymentAPI(failEvery int) *paymentAPI {
	return &paymentAPI{failEvery: failEvery, charges: map[string]*charge{}}
}

func (p *paymentAPI) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/charges", p.createCharge)
	mux.HandleFunc("GET /v1/charges", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.list())
	})
	return mux
}

func (p *paymentAPI) createCharge(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	var req chargeRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil || key == "" || req.AmountCents <= 0 {
		http.Error(w, "need an Idempotency-Key header and a positive amount_cents", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	if len(p.refuse) > 0 {
		status := p.refuse[0]
		p.refuse = p.refuse[1:]
		p.mu.Unlock()
		http.Error(w, http.StatusText(status)+" (simulated)", status)
		return
	}
	c, replay := p.charges[key]
	if replay {
		c.Requests++
	} else {
		p.created++
		c = &charge{ID: fmt.Sprintf("ch_%06d", p.created), IdempotencyKey: key, AmountCents: req.AmountCents, Reference: req.Reference, Requests: 1}
		p.charges[key] = c
	}
	lose := !replay && p.failEvery > 0 && p.created%p.failEvery == 0
	resp := *c
	p.mu.Unlock()
	if !replay {
		p.afterCharge.run(r, resp)
	}

	if lose {
		http.Error(w, "gateway timeout after charging (simulated)", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if replay {
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
	_ = json.NewEncoder(w).Encode(resp)
}

// refuseNext makes the next requests answer statuses, one each, without
// charging: 409 as a gateway answers while a request with the same
// idempotency key is in flight, 429 when rate limiting, 422 for a charge it
// will never accept.
func (p *paymentAPI) refuseNext(statuses ...int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = append(p.refuse, statuses...)
}

// list returns every charge, by ID.
func (p *paymentAPI) list() []charge {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := chargeCopies(maps.Values(p.charges), len(p.charges))
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// chargeCopies copies the n charges of cs, for a caller to read without
// the provider's lock.
func chargeCopies(cs iter.Seq[*charge], n int) []charge {
	out := make([]charge, 0, n)
	for c := range cs {
		out = append(out, *c)
	}
	return out
}
