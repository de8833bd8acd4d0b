// Package testenv gives tests the real components they run against: a
// PostgreSQL server with wal_level=logical (one per test binary, a fresh
// database per test), a Kafka-protocol broker over TCP per test (kfake), and a
// reader that checks a topic with kcat, an independent librdkafka client.
//
// Every package that uses it calls Main from TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// Main stops the shared server, removes its temporary directory and checks for
// leaked goroutines, also when tests fail.
//
// # External server
//
// When PGOUTBOX_TEST_DATABASE_URL is set (a superuser URL of a server with
// wal_level=logical), tests create their databases there instead of starting
// a server. Otherwise the server binaries are looked up on PATH and under
// /usr/lib/postgresql/*/bin; when running as root the server runs as the
// postgres OS user, because initdb refuses to run as root.
//
// # External broker
//
// When PGOUTBOX_TEST_KAFKA_BROKERS is set, tests that call NewBroker (those
// written for any Kafka-protocol broker) use it instead of kfake, with
// topic and group names prefixed per test (Kafka.TopicPrefix). Tests that
// shape or break the broker (NewKafka with options, Cluster.Control) keep
// kfake.
package testenv
