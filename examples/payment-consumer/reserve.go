package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// chargeReserveConfirm is the external handler for a provider without
// idempotency keys that charges in two steps: reserve the amount (the
// provider returns a reservation ID; a reservation not confirmed within its
// TTL is voided), save the reservation ID with inbox.SaveRequestRef, then
// confirm it. Confirm is idempotent per reservation, so a later attempt (a
// takeover after a crash, or a retry after a lost response) confirms the
// saved reservation again: the provider answers the charge the first
// confirm made, or makes it now, and never charges twice. Only when the
// saved reservation was voided (it expired unconfirmed, so nobody can
// confirm it any more) does the attempt reserve anew.
//
// A crash between reserve and SaveRequestRef leaves an unsaved reservation
// that expires: it holds the customer's funds for the TTL but never charges.
func (c *paymentClient) chargeReserveConfirm(ctx context.Context, msg inbox.Message, key string) (string, error) {
	ev, err := parseOrder(msg)
	if err != nil {
		return "", err
	}
	a, _ := inbox.AttemptFromContext(ctx)
	if a.PreviousRequestRef != "" {
		id, before, err := c.confirm(ctx, a.PreviousRequestRef)
		var gone *apiError
		switch {
		case err == nil && before:
			return id, inbox.ErrAlreadyDone
		case err == nil:
			return id, nil // the previous attempt reserved; this one charged
		case !errors.As(err, &gone) || gone.Status != http.StatusGone:
			return "", err
		}
		// Voided: reserve again.
	}
	var res reservation
	if err := c.call(ctx, http.MethodPost, "/v1/reservations", nil,
		noKeyChargeRequest{AmountCents: ev.AmountCents, Reference: fmt.Sprintf("%s/attempt-%d", key, a.Number)}, &res); err != nil {
		return "", err
	}
	// Fenced by the lease: after a takeover this fails, the reservation is
	// never confirmed and expires.
	if err := inbox.SaveRequestRef(ctx, res.ID); err != nil {
		return "", err
	}
	id, _, err := c.confirm(ctx, res.ID)
	return id, err
}

// confirm confirms the reservation id and returns the charge ID; before
// says that an earlier confirm made the charge.
func (c *paymentClient) confirm(ctx context.Context, id string) (chargeID string, before bool, err error) {
	var resp confirmResponse
	if err := c.call(ctx, http.MethodPost, "/v1/reservations/"+url.PathEscape(id)+"/confirm", nil, nil, &resp); err != nil {
		return "", false, fmt.Errorf("confirm %s: %w", id, err)
	}
	return resp.Charge.ID, resp.ConfirmedBefore, nil
}
