package testenv

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Main runs m, stops the shared Postgres server and Apache Kafka broker,
// and fails the run when goroutines leaked (but for those matched by
// ignore, added to LeakOptions). Call it from TestMain.
func Main(m *testing.M, ignore ...goleak.Option) {
	exit(m.Run(), ignore)
}

// exit stops the shared Postgres server and Kafka broker and exits with code, or 1 when
// code is 0 but goroutines leaked.
func exit(code int, ignore []goleak.Option) {
	atExit.Lock()
	fs := atExit.fs
	atExit.fs = nil
	atExit.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
	stopServer()
	stopApacheKafka()
	stopRabbitMQ()
	if code == 0 {
		if err := findLeaks(append(LeakOptions(), ignore...)); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// findLeaks is goleak.Find, asked again for up to leakWait while it finds
// any: goleak waits under half a second, and on a loaded machine a
// client's reader goroutine, runnable after its connection closed, was
// still finishing then (a stream client handling a last confirmation). A
// goroutine that leaked stays.
func findLeaks(opts []goleak.Option) error {
	deadline := time.Now().Add(leakWait)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// leakWait is how long findLeaks asks again.
const leakWait = 5 * time.Second

// MainWithDatabase is Main with a fresh database on the test server whose
// URL is in DATABASE_URL while m runs, so runnable examples can connect the
// way users do, pgxpool.New(ctx, os.Getenv("DATABASE_URL")). The database
// is dropped afterwards.
func MainWithDatabase(m *testing.M, ignore ...goleak.Option) {
	db, err := OpenDB()
	if err != nil {
		fmt.Fprintf(os.Stderr, "postgres: %v\n", err)
		os.Exit(1)
	}
	if err := os.Setenv("DATABASE_URL", db.URL); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := db.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "drop example database: %v\n", err)
		code = 1
	}
	exit(code, ignore)
}

// LeakOptions lists goroutines that outlive a test by design. One is the
// module's own: a producer declaration the RabbitMQ publisher gave up on
// while the node was away, which the stream client retries without end
// until the node is back (TestAbandonedDeclarationEndsWhenNodeReturns);
// a test that stopped its node for good leaves it. A test binary that
// links a client keeping process-wide goroutines (kafka-go, in the
// inbox's kafka-go adapter) passes its own ignore rule to Main or
// MainWithDatabase.
func LeakOptions() []goleak.Option {
	return []goleak.Option{goleak.IgnoreAnyFunction("github.com/pgoutbox/pgoutbox/internal/publish/rabbitmqpub.(*conn).declare.func1")}
}

// atExit holds what AtExit registered.
var atExit struct {
	sync.Mutex
	fs []func()
}

// AtExit registers f to run when Main or MainWithDatabase ends the test
// binary, after every test and before the shared servers stop, the last
// registered first: the cleanup of what the binary's tests share (binaries
// built once for all of them, say), which no one test's Cleanup may own.
func AtExit(f func()) {
	atExit.Lock()
	defer atExit.Unlock()
	atExit.fs = append(atExit.fs, f)
}
