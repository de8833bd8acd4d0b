// Package inboxtest holds the test fixtures that the tests of package inbox
// (the dedup core) and of package inboxkafka (its consumer loop) share: a
// migrated database with an Inbox on it and a side-effect table (Setup), the
// handlers that write one effect row, a broker with a topic (NewKafka),
// records to produce (Rec, Spread) and the offsets they end at
// (EndOffsets), and a consumer loop run until its offsets are committed
// (StartConsumer, RunConsumer).
//
// It is test code that lives outside a _test.go file so that both
// packages' tests can import it; nothing outside pkg/inbox can.
package inboxtest
