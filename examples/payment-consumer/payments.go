package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// orderPlaced is the payload of the producer example's order.placed event.
type orderPlaced struct {
	OrderID     string `json:"order_id"`
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amount_cents"`
}

// paymentClient calls the payment API.
type paymentClient struct {
	baseURL string
	http    *http.Client
}

func newPaymentClient(baseURL string) *paymentClient {
	return &paymentClient{baseURL: baseURL, http: &http.Client{Timeout: 10 * time.Second}}
}

// charge is the consumer's external handler: it charges the order's amount
// with the inbox's idempotency key (the event's business key) and returns
// the charge ID, which the inbox stores as the result reference. An error
// leaves the message to be retried with the same key; a request the API
// refuses for good (a 4xx other than those retryableStatus lists) will never
// succeed and is dead-lettered at once.
func (c *paymentClient) charge(ctx context.Context, msg inbox.Message, idempotencyKey string) (string, error) {
	var ev orderPlaced
	if err := json.Unmarshal(msg.Payload, &ev); err != nil {
		return "", inbox.Permanent(fmt.Errorf("order.placed payload: %w", err))
	}
	body, err := json.Marshal(chargeRequest{AmountCents: ev.AmountCents, Reference: ev.OrderID})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"/v1/charges", bytes.NewReader(body))
	if err != nil {
		return "", inbox.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idempotencyKey)
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("payment API: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		err := fmt.Errorf("payment API: %s: %s", resp.Status, bytes.TrimSpace(msg))
		if !retryableStatus(resp.StatusCode) {
			return "", inbox.Permanent(fmt.Errorf("refused the charge: %w", err))
		}
		return "", err
	}
	var ch charge
	if err := json.NewDecoder(resp.Body).Decode(&ch); err != nil || ch.ID == "" {
		return "", errors.Join(errors.New("payment API: unreadable response"), err)
	}
	return ch.ID, nil
}

// retryableStatus reports whether a failed request may succeed when sent
// again with the same idempotency key: 5xx, 408 Request Timeout, 409
// Conflict (what gateways answer while a request with the same key is still
// in flight: exactly the lease takeover case), 425 Too Early and 429 Too
// Many Requests.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return code >= 500
}
