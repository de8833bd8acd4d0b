// Command producer is an example service that writes its business change
// (an order) and the matching outbox row in ONE transaction with
// pkg/outbox. The relay publishes the row to Kafka once the transaction
// commits; a rolled-back order never produces an event.
//
//	go run ./examples/producer --database-url "$DATABASE_URL"
//	curl -X POST localhost:8080/orders -d '{"customer":"ada","amount_cents":1200}'
//
// Run it with --help for the flags; DATABASE_URL, LISTEN_ADDR and
// ORDER_EVERY set their defaults.
package main
