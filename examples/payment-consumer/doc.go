// Command payment-consumer is an example inbox consumer with an external
// side effect: for every order.placed event it charges a payment API. The
// charge goes through the inbox's two-phase path (ProcessExternal), so
// however often Kafka delivers the event, and even when a charge's response
// is lost or the worker dies after the charge, the customer is charged once.
// --strategy picks how a retry avoids the second charge:
//
//   - idempotency-key (default): the event's business key is the payment
//     API's idempotency key (payments.go).
//   - query-status: for an API without idempotency keys; a saved request
//     reference is looked up at the API's status endpoint first
//     (querystatus.go).
//   - reserve-confirm: for an API without idempotency keys that reserves
//     and confirms; the saved reservation is confirmed again (reserve.go).
//
// By default it starts a fake payment API in-process that matches the
// strategy (paymentapi.go keeps an idempotency-key store, nokeyapi.go has
// none); --payment-api-url uses another one.
//
//	go run ./examples/payment-consumer --database-url "$DATABASE_URL" --brokers localhost:9092
//	curl localhost:8081/v1/charges   # what the fake API charged
//
// Run it with --help for the flags; DATABASE_URL, KAFKA_BROKERS,
// PAYMENT_STRATEGY, PAYMENT_API_URL, PAYMENT_API_LISTEN and METRICS_ADDR set
// their defaults.
package main
