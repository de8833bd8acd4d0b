// Package e2e holds end-to-end and fault-injection tests that run the real
// relay binary against a real Postgres (testenv) and a Kafka-protocol broker
// over TCP (kfake), and check Kafka with kcat.
package e2e
