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

// parseOrder decodes msg's order.placed payload; a payload that does not
// decode never will, so the error is permanent.
func parseOrder(msg inbox.Message) (orderPlaced, error) {
	var ev orderPlaced
	if err := json.Unmarshal(msg.Payload, &ev); err != nil {
		return ev, inbox.Permanent(fmt.Errorf("order.placed payload: %w", err))
	}
	return ev, nil
}

// paymentClient calls the payment API.
type paymentClient struct {
	baseURL string
	http    *http.Client
	// timeout bounds each request (http.Client.Timeout); the query-status
	// strategy also sends it to the provider as the request's deadline.
	timeout time.Duration
}

func newPaymentClient(baseURL string, timeout time.Duration) *paymentClient {
	return &paymentClient{baseURL: baseURL, http: &http.Client{Timeout: timeout}, timeout: timeout}
}

// charge is the consumer's external handler for the API with idempotency
// keys: it charges the order's amount with the inbox's idempotency key (the
// event's business key) and returns the charge ID, which the inbox stores as
// the result reference. An error leaves the message to be retried with the
// same key; a request the API refuses for good (a 4xx other than those
// retryableStatus lists) will never succeed and is dead-lettered at once.
func (c *paymentClient) charge(ctx context.Context, msg inbox.Message, idempotencyKey string) (string, error) {
	ev, err := parseOrder(msg)
	if err != nil {
		return "", err
	}
	var ch charge
	err = c.call(ctx, http.MethodPost, "/v1/charges", map[string]string{"Idempotency-Key": idempotencyKey},
		chargeRequest{AmountCents: ev.AmountCents, Reference: ev.OrderID}, &ch)
	if err != nil {
		return "", err
	}
	if ch.ID == "" {
		return "", errors.New("payment API: no charge ID in the response")
	}
	return ch.ID, nil
}

// apiError is a payment API's answer with an error status.
type apiError struct {
	Status int
	Text   string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("payment API: %d %s: %s", e.Status, http.StatusText(e.Status), e.Text)
}

// call sends body as JSON with header and decodes a 2xx answer into out.
// Any other answer is an *apiError, wrapped with inbox.Permanent unless
// retryableStatus says that sending it again may succeed.
func (c *paymentClient) call(ctx context.Context, method, path string, header map[string]string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, r)
	if err != nil {
		return inbox.Permanent(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("payment API: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		err := &apiError{Status: resp.StatusCode, Text: string(bytes.TrimSpace(text))}
		if !retryableStatus(resp.StatusCode) {
			return inbox.Permanent(fmt.Errorf("refused: %w", err))
		}
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("payment API: unreadable response: %w", err)
	}
	return nil
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
