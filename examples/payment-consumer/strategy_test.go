package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// setupNoKey returns an inbox on a fresh database, a provider without
// idempotency keys, a client of it, and an order.placed message.
func setupNoKey(t *testing.T) (*inbox.Inbox[pgx.Tx], *noKeyAPI, *paymentClient, inbox.Message) {
	t.Helper()
	api := newNoKeyAPI(0, time.Minute)
	return newInbox(t, inbox.Config{}), api, serveAPI(t, api.routes()),
		orderMessage(orderPlaced{OrderID: "o-1", Customer: "ada", AmountCents: 4200}, uuid.NewString())
}

var errLost = errors.New("request lost before it reached the provider")

// A first attempt saved its request reference and died before the request
// reached the provider. The retry's lookup finds nothing, but the request's
// deadline has not passed, so it could still land: the retry waits for the
// deadline, looks again, and only then charges under a new reference.
func TestQueryStatusWaitsForTheDeadlineBeforeCharging(t *testing.T) {
	t.Parallel()
	in, api, client, msg := setupNoKey(t)
	ctx := context.Background()
	// Far enough ahead that the retry's first lookup comes before it, even
	// on a loaded machine.
	notAfter := time.Now().Add(2 * time.Second)
	res, err := in.ProcessExternal(ctx, msg, func(ctx context.Context, _ inbox.Message, key string) (string, error) {
		saved, _ := json.Marshal(sentRequest{Ref: key + "/attempt-1", NotAfter: notAfter})
		if err := inbox.SaveRequestRef(ctx, string(saved)); err != nil {
			return "", err
		}
		return "", errLost
	})
	if err != nil || res.Outcome != inbox.Retry {
		t.Fatalf("first attempt: %v %v, want Retry", res.Outcome, err)
	}

	res, err = in.ProcessExternal(ctx, msg, client.chargeQueryStatus)
	charges := api.list()
	if err != nil || res.Outcome != inbox.Processed || res.Reconciled || len(charges) != 1 || res.ResultRef != charges[0].ID {
		t.Fatalf("retry: %v %v reconciled %v ref %q; charges %+v; want one new charge", res.Outcome, err, res.Reconciled, res.ResultRef, charges)
	}
	if charges[0].Reference != "charge-o-1/attempt-2" {
		t.Errorf("charged under %q, want the retry's own reference", charges[0].Reference)
	}
	if time.Now().Before(notAfter) {
		t.Errorf("charged after lookups %q, before the first request's deadline %v passed", api.lookedUp(), notAfter)
	}
}

// The provider charges but answers only after the client gave up (a
// timeout): the retry asks the status endpoint about the saved reference,
// finds the charge and completes with it (Reconciled), charging nothing.
func TestQueryStatusReconcilesAfterATimeout(t *testing.T) {
	t.Parallel()
	in, api, client, msg := setupNoKey(t)
	// The request must reach the provider before the client gives up, even
	// on a loaded machine.
	client = newPaymentClient(client.baseURL, 2*time.Second)
	api.afterCharge.set(func(r *http.Request, _ charge) {
		api.afterCharge.set(nil)
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done() // the client timed out
	})
	ctx := context.Background()
	handler := client.chargeQueryStatus
	res, err := in.ProcessExternal(ctx, msg, handler)
	if err != nil || res.Outcome != inbox.Retry || !errors.Is(res.Err, context.DeadlineExceeded) {
		t.Fatalf("first attempt: %v %v (%v), want Retry after a timeout", res.Outcome, err, res.Err)
	}
	res, err = in.ProcessExternal(ctx, msg, handler)
	charges := api.list()
	if err != nil || res.Outcome != inbox.Processed || !res.Reconciled || len(charges) != 1 || res.ResultRef != charges[0].ID || charges[0].Requests != 1 {
		t.Fatalf("retry: %v %v reconciled %v ref %q; charges %+v; want the first charge, reconciled", res.Outcome, err, res.Reconciled, res.ResultRef, charges)
	}
	if l := api.lookedUp(); len(l) != 1 || l[0] != charges[0].Reference {
		t.Errorf("lookups %q, want one of %q", l, charges[0].Reference)
	}
}

// The provider refuses a charge request past its deadline, without
// charging: what makes the lookup after the deadline final. The refusal is
// retryable: a new request (a new reference, a new deadline) may charge.
func TestNoKeyAPIRefusesAnExpiredRequest(t *testing.T) {
	t.Parallel()
	api := newNoKeyAPI(0, time.Minute)
	client := serveAPI(t, api.routes())
	var ch charge
	err := client.call(context.Background(), "POST", "/v1/charges", nil,
		noKeyChargeRequest{AmountCents: 100, Reference: "r-1", NotAfter: time.Now().Add(-time.Millisecond)}, &ch)
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != http.StatusRequestTimeout || inbox.IsPermanent(err) || len(api.list()) != 0 {
		t.Fatalf("expired request: %v; charges %+v; want a retryable 408 and no charge", err, api.list())
	}
}

// A first attempt reserved and saved the reservation, then died before
// confirming. The retry confirms the saved reservation: one reservation,
// one charge. When the reservation expired meanwhile it was voided, the
// retry's confirm answers 410 Gone, and the retry reserves anew and confirms
// that: still one charge, the voided reservation never charges.
func TestReserveConfirmRetryAfterReserving(t *testing.T) {
	t.Parallel()
	for _, expired := range []bool{false, true} {
		t.Run(fmt.Sprintf("expired=%v", expired), func(t *testing.T) {
			t.Parallel()
			in, api, client, msg := setupNoKey(t)
			ctx := context.Background()
			var first reservation
			res, err := in.ProcessExternal(ctx, msg, func(ctx context.Context, _ inbox.Message, key string) (string, error) {
				if err := client.call(ctx, "POST", "/v1/reservations", nil,
					noKeyChargeRequest{AmountCents: 4200, Reference: key + "/attempt-1"}, &first); err != nil {
					return "", err
				}
				if err := inbox.SaveRequestRef(ctx, first.ID); err != nil {
					return "", err
				}
				return "", errLost
			})
			if err != nil || res.Outcome != inbox.Retry {
				t.Fatalf("first attempt: %v %v, want Retry", res.Outcome, err)
			}
			if expired {
				api.mu.Lock()
				api.now = func() time.Time { return time.Now().Add(2 * time.Minute) } // past the TTL
				api.mu.Unlock()
			}

			res, err = in.ProcessExternal(ctx, msg, client.chargeReserveConfirm)
			charges, rs := api.list(), api.listReservations()
			if err != nil || res.Outcome != inbox.Processed || res.Reconciled || len(charges) != 1 || res.ResultRef != charges[0].ID {
				t.Fatalf("retry: %v %v reconciled %v ref %q; charges %+v; want one charge", res.Outcome, err, res.Reconciled, res.ResultRef, charges)
			}
			switch {
			case !expired && (len(rs) != 1 || rs[0].ID != first.ID || rs[0].ChargeID != charges[0].ID):
				t.Errorf("reservations %+v, want %s confirmed", rs, first.ID)
			case expired && (len(rs) != 2 || rs[0].ID != first.ID || rs[0].Status != "voided" || rs[1].Status != "confirmed" || charges[0].ReservationID != rs[1].ID):
				t.Errorf("reservations %+v, want %s voided and a second one confirmed", rs, first.ID)
			}
		})
	}
}
