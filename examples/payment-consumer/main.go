// Command payment-consumer is an example inbox consumer with an external
// side effect: for every order.placed event it charges a payment API. The
// charge goes through the inbox's two-phase path (ProcessExternal), with the
// event's business key as the payment API's idempotency key, so however
// often Kafka delivers the event, and even when a charge's response is lost
// and the call is retried, the customer is charged once.
//
// By default it starts a fake payment API in-process (an HTTP server that
// keeps an idempotency-key store); --payment-api-url uses another one.
//
//	go run ./examples/payment-consumer --database-url "$DATABASE_URL" --brokers localhost:9092
//	curl localhost:8081/v1/charges   # what the fake API charged
//
// Run it with --help for the flags; DATABASE_URL, KAFKA_BROKERS,
// PAYMENT_API_URL, PAYMENT_API_LISTEN and METRICS_ADDR set their defaults.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
