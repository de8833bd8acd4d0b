// Package testenv gives tests the real components they run against: a
// PostgreSQL server with wal_level=logical (one per test binary, a fresh
// database per test), a Kafka broker over TCP (kfake per test, or one real
// Apache Kafka per test binary), and a reader that checks a topic with kcat,
// an independent librdkafka client.
//
// Every package that uses it calls Main from TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// Main stops the shared server and broker, removes their temporary
// directories and checks for leaked goroutines, also when tests fail.
//
// # External server
//
// When PGOUTBOX_TEST_DATABASE_URL is set (a superuser URL of a server with
// wal_level=logical), tests create their databases there instead of starting
// a server. Otherwise the server binaries are looked up on PATH and under
// /usr/lib/postgresql/*/bin; when running as root the server runs as the
// postgres OS user, because initdb refuses to run as root.
//
// # Postgres version
//
// PGOUTBOX_TEST_PG picks the major version of the servers the tests start
// (PostgresVersion): 15, the default, is Debian's; 16, 17 and 18 are the
// zonky embedded-postgres bundles pinned in test/postgres/pom.xml, fetched
// with Maven into the cache once (as the Kafka jars are) and unpacked there,
// or, as root, under the temporary directory, where the postgres OS user can
// run them. The bundles have no pg_basebackup: Server.StartStandby copies
// the data directory between pg_backup_start and pg_backup_stop instead.
//
// # Real Kafka
//
// Tests that call NewBroker (those written for any Kafka broker) run on
// kfake by default. With PGOUTBOX_TEST_KAFKA=kafka they share one Apache
// Kafka node per test binary instead (StartApacheKafka: the version pinned
// in test/kafka/pom.xml, fetched with Maven into a cache once, KRaft,
// started with java on free loopback ports); with
// PGOUTBOX_TEST_KAFKA_BROKERS they use that external broker. On a shared
// broker topic and group names are prefixed per test (Kafka.TopicPrefix).
// Tests that shape or break the broker (NewKafka with options,
// Cluster.Control) keep kfake, or skip on a real broker (Kafka.Fake).
//
// # NATS and RabbitMQ
//
// NewNATS starts an embedded nats-server per test (JetStream on disk in a
// temporary directory, every write synced: sync_interval always).
// SharedRabbitMQ starts one rabbitmq-server node per test binary (Debian's
// package, the stream plugin enabled, its own node name, ports, Erlang port
// mapper and cookie under a temporary directory), and skips the test with
// a message saying how to install it when rabbitmq-server is missing.
// StartRabbitMQ starts a node of the caller's own (for a restart, or a
// change of its plugins), NewRabbitMQTLS one with a stream TLS listener
// (NewPKI makes its throwaway CA and certificates), and CommandEnv is the
// environment RabbitMQ's command line tools reach a node with.
package testenv
