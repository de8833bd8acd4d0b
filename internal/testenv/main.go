package testenv

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main runs m, stops the shared Postgres server, and fails the run when
// goroutines leaked. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	stopServer()
	if code == 0 {
		if err := goleak.Find(LeakOptions()...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// LeakOptions lists goroutines that outlive a test by design. Code under test
// must close its own kafka-go Transport (CloseIdleConnections); only the
// process-wide discovery loop of kafka-go's connection pool may remain.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		// kafka-go keeps one process-wide goroutine that expires cached
		// connections of its default Transport.
		goleak.IgnoreTopFunction("github.com/segmentio/kafka-go.(*connPool).discover"),
	}
}
