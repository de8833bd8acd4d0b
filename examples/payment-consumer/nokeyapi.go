package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"
)

// noKeyAPI is a fake payment provider WITHOUT idempotency keys, the hard
// case: every charge request charges, so a retry after a lost response
// charges twice unless the caller first finds out what happened. It offers
// the two ways out that such providers usually have:
//
//   - a status endpoint: GET /v1/charges?reference=R finds the charges made
//     for the caller's request reference R. A charge request may carry a
//     deadline (not_after); the provider refuses it once the deadline has
//     passed, so a lookup made after the deadline ("as_of" in the answer) is
//     final: that request will never land.
//   - reserve → confirm: POST /v1/reservations holds an amount and returns a
//     reservation ID; POST /v1/reservations/{id}/confirm charges it. Confirm
//     is idempotent per reservation (a second confirm answers the same
//     charge with confirmed_before: true), and a reservation not confirmed
//     within its TTL is voided (confirm then answers 410 Gone).
//
// With failEvery = n, the response of every n-th charge (a direct charge
// or a first confirm) is lost after charging (504), as when a gateway times
// out after the provider did the work. afterCharge runs after charging.
type noKeyAPI struct {
	failEvery      int
	reservationTTL time.Duration
	now            func() time.Time

	mu           sync.Mutex
	charges      []*charge
	reservations map[string]*reservation
	created      int      // charges made, for failEvery
	lookups      []string // references looked up
	afterCharge  chargeHook
}

// reservation is one reservation of the noKeyAPI.
type reservation struct {
	ID          string    `json:"id"`
	Reference   string    `json:"reference"`
	AmountCents int64     `json:"amount_cents"`
	Status      string    `json:"status"` // reserved, confirmed, voided
	ExpiresAt   time.Time `json:"expires_at"`
	ChargeID    string    `json:"charge_id,omitempty"`
	// Confirms counts the confirm requests it got.
	Confirms int `json:"confirms"`
}

// noKeyChargeRequest is the body of POST /v1/charges and of POST
// /v1/reservations (which ignores NotAfter).
type noKeyChargeRequest struct {
	AmountCents int64     `json:"amount_cents"`
	Reference   string    `json:"reference"`
	NotAfter    time.Time `json:"not_after,omitzero"`
}

// lookupResponse answers GET /v1/charges?reference=R.
type lookupResponse struct {
	Charges []charge `json:"charges"`
	// AsOf is the provider's clock when it looked.
	AsOf time.Time `json:"as_of"`
}

// confirmResponse answers POST /v1/reservations/{id}/confirm.
type confirmResponse struct {
	Charge charge `json:"charge"`
	// ConfirmedBefore is set when an earlier confirm charged.
	ConfirmedBefore bool `json:"confirmed_before"`
}

func newNoKeyAPI(failEvery int, reservationTTL time.Duration) *noKeyAPI {
	return &noKeyAPI{failEvery: failEvery, reservationTTL: reservationTTL, now: time.Now, reservations: map[string]*reservation{}}
}

func (p *noKeyAPI) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/charges", p.createCharge)
	mux.HandleFunc("GET /v1/charges", p.listCharges)
	mux.HandleFunc("POST /v1/reservations", p.reserve)
	mux.HandleFunc("POST /v1/reservations/{id}/confirm", p.confirm)
	mux.HandleFunc("GET /v1/reservations", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, p.listReservations())
	})
	return mux
}

func (p *noKeyAPI) createCharge(w http.ResponseWriter, r *http.Request) {
	var req noKeyChargeRequest
	if !readChargeRequest(w, r, &req) {
		return
	}
	p.mu.Lock()
	if !req.NotAfter.IsZero() && p.now().After(req.NotAfter) {
		p.mu.Unlock()
		// Retryable: nothing was charged, a new request may be.
		http.Error(w, "request expired (not_after has passed): nothing charged", http.StatusRequestTimeout)
		return
	}
	c := p.newChargeLocked(req.AmountCents, req.Reference, "")
	lose := p.failEvery > 0 && p.created%p.failEvery == 0
	p.mu.Unlock()
	p.answerCharge(w, r, lose, http.StatusCreated, c, c)
}

// newChargeLocked records a charge; p.mu is held.
func (p *noKeyAPI) newChargeLocked(amount int64, reference, reservationID string) charge {
	p.created++
	c := &charge{ID: fmt.Sprintf("ch_%06d", p.created), AmountCents: amount, Reference: reference, ReservationID: reservationID, Requests: 1}
	p.charges = append(p.charges, c)
	return *c
}

// answerCharge answers a request that charged c: through afterCharge, and
// with a lost response (504) when lose is set.
func (p *noKeyAPI) answerCharge(w http.ResponseWriter, r *http.Request, lose bool, status int, c charge, body any) {
	p.afterCharge.run(r, c)
	if lose {
		http.Error(w, "gateway timeout after charging (simulated)", http.StatusGatewayTimeout)
		return
	}
	writeJSON(w, status, body)
}

func (p *noKeyAPI) listCharges(w http.ResponseWriter, r *http.Request) {
	ref, lookup := r.URL.Query().Get("reference"), r.URL.Query().Has("reference")
	p.mu.Lock()
	resp := lookupResponse{Charges: []charge{}, AsOf: p.now()}
	for _, c := range p.charges {
		if !lookup || c.Reference == ref {
			resp.Charges = append(resp.Charges, *c)
		}
	}
	if lookup {
		p.lookups = append(p.lookups, ref)
	}
	p.mu.Unlock()
	if lookup {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	writeJSON(w, http.StatusOK, resp.Charges)
}

func (p *noKeyAPI) reserve(w http.ResponseWriter, r *http.Request) {
	var req noKeyChargeRequest
	if !readChargeRequest(w, r, &req) {
		return
	}
	p.mu.Lock()
	res := &reservation{ID: fmt.Sprintf("rsv_%06d", len(p.reservations)+1), Reference: req.Reference, AmountCents: req.AmountCents,
		Status: "reserved", ExpiresAt: p.now().Add(p.reservationTTL)}
	p.reservations[res.ID] = res
	out := *res
	p.mu.Unlock()
	writeJSON(w, http.StatusCreated, out)
}

func (p *noKeyAPI) confirm(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	res, ok := p.reservations[r.PathValue("id")]
	if !ok {
		p.mu.Unlock()
		http.Error(w, "no such reservation", http.StatusNotFound)
		return
	}
	res.Confirms++
	p.voidExpiredLocked(res)
	switch res.Status {
	case "voided":
		p.mu.Unlock()
		http.Error(w, "reservation expired unconfirmed and was voided: nothing charged", http.StatusGone)
		return
	case "confirmed":
		var c charge
		for _, ch := range p.charges {
			if ch.ID == res.ChargeID {
				ch.Requests++
				c = *ch
			}
		}
		p.mu.Unlock()
		writeJSON(w, http.StatusOK, confirmResponse{Charge: c, ConfirmedBefore: true})
		return
	}
	c := p.newChargeLocked(res.AmountCents, res.Reference, res.ID)
	res.Status, res.ChargeID = "confirmed", c.ID
	lose := p.failEvery > 0 && p.created%p.failEvery == 0
	p.mu.Unlock()
	p.answerCharge(w, r, lose, http.StatusCreated, c, confirmResponse{Charge: c})
}

// voidExpiredLocked voids res when it expired unconfirmed; p.mu is held.
func (p *noKeyAPI) voidExpiredLocked(res *reservation) {
	if res.Status == "reserved" && p.now().After(res.ExpiresAt) {
		res.Status = "voided"
	}
}

// list returns every charge, in the order they were made.
func (p *noKeyAPI) list() []charge {
	p.mu.Lock()
	defer p.mu.Unlock()
	return chargeCopies(slices.Values(p.charges), len(p.charges))
}

// listReservations returns every reservation, by ID, voiding the expired
// ones first.
func (p *noKeyAPI) listReservations() []reservation {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]reservation, 0, len(p.reservations))
	for _, res := range p.reservations {
		p.voidExpiredLocked(res)
		out = append(out, *res)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// lookedUp returns the references of the status lookups the API answered.
func (p *noKeyAPI) lookedUp() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.lookups)
}

func readChargeRequest(w http.ResponseWriter, r *http.Request, req *noKeyChargeRequest) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(req); err != nil || req.AmountCents <= 0 || req.Reference == "" {
		http.Error(w, "need a positive amount_cents and a reference", http.StatusBadRequest)
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
