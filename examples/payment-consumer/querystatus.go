package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// sentRequest is what the query-status strategy saves with
// inbox.SaveRequestRef before it calls out: the reference the charge
// request carries, and the deadline after which the provider refuses it.
type sentRequest struct {
	Ref      string    `json:"ref"`
	NotAfter time.Time `json:"not_after"`
}

// chargeQueryStatus is the external handler for a provider without
// idempotency keys that can be asked what happened: it saves a request
// reference (and the request's deadline) before it charges, and a later
// attempt (a takeover after a crash, or a retry after a timeout or a lost
// response) first asks the provider's status endpoint about that reference.
// Found: the charge was made, the message completes with its ID
// (inbox.ErrAlreadyDone) and nothing is charged again. Not found: the
// handler waits until the provider's clock is past the previous request's
// deadline, so that request can no longer land, and only then charges with
// a new reference.
//
// Without the deadline a request still in flight could land after the
// lookup said "not found": a second charge. That is the weak spot of this
// strategy; reserve → confirm has none.
func (c *paymentClient) chargeQueryStatus(ctx context.Context, msg inbox.Message, key string) (string, error) {
	ev, err := parseOrder(msg)
	if err != nil {
		return "", err
	}
	a, _ := inbox.AttemptFromContext(ctx)
	if a.PreviousRequestRef != "" {
		var prev sentRequest
		if err := json.Unmarshal([]byte(a.PreviousRequestRef), &prev); err != nil {
			return "", inbox.Permanent(fmt.Errorf("saved request reference %q: %w", a.PreviousRequestRef, err))
		}
		id, found, err := c.settle(ctx, prev)
		if err != nil {
			return "", err
		}
		if found {
			return id, inbox.ErrAlreadyDone
		}
	}
	req := sentRequest{Ref: fmt.Sprintf("%s/attempt-%d", key, a.Number), NotAfter: time.Now().Add(c.timeout).UTC()}
	saved, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	// Fenced by the lease: after a takeover this fails and nothing is sent.
	if err := inbox.SaveRequestRef(ctx, string(saved)); err != nil {
		return "", err
	}
	var ch charge
	if err := c.call(ctx, http.MethodPost, "/v1/charges", nil,
		noKeyChargeRequest{AmountCents: ev.AmountCents, Reference: req.Ref, NotAfter: req.NotAfter}, &ch); err != nil {
		return "", err
	}
	return ch.ID, nil
}

// settle finds out whether the request prev was charged: it asks the
// status endpoint until it finds the charge or the provider's clock is past
// prev's deadline (the request was refused or never arrived). It returns
// with an error when ctx (the lease) ends first.
func (c *paymentClient) settle(ctx context.Context, prev sentRequest) (chargeID string, found bool, err error) {
	for {
		var st lookupResponse
		if err := c.call(ctx, http.MethodGet, "/v1/charges?reference="+url.QueryEscape(prev.Ref), nil, nil, &st); err != nil {
			return "", false, fmt.Errorf("look up %s: %w", prev.Ref, err)
		}
		if len(st.Charges) > 0 {
			return st.Charges[0].ID, true, nil
		}
		if st.AsOf.After(prev.NotAfter) {
			return "", false, nil
		}
		t := time.NewTimer(prev.NotAfter.Sub(st.AsOf) + 10*time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", false, context.Cause(ctx)
		case <-t.C:
		}
	}
}
