package publish

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Default is the publisher the relay uses when none is named.
const Default = "kafka"

// Config is what the relay gives every publisher it makes (New).
type Config struct {
	// Slot is the relay's slot, for logs (and a broker's producer
	// name).
	Slot string
	// Settings are the broker's own settings, of the type its package
	// declares (kafkapub.Config for "kafka"), derived from relay.Config by
	// package relay; nil for a publisher that needs none. A Factory given
	// settings of another type returns an error wrapping
	// relaytype.ErrConfig.
	Settings any
	// Metrics, when set, is where the publisher counts what is its own
	// to count (failed broker requests, progress records it ignored).
	Metrics *relaymetrics.Metrics
	// Logger receives the publisher's logs.
	Logger *slog.Logger
}

// Factory makes a Publisher from c; it connects to nothing (Open does).
type Factory func(c Config) (Publisher, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Factory{}
)

// Register makes the publisher name available to New. A publisher's
// package calls it from its init function, so importing the package is
// the one line that registers it. It panics when name is empty or taken,
// as database/sql.Register does.
func Register(name string, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if name == "" || f == nil {
		panic("publish: Register needs a name and a factory")
	}
	if _, dup := registry[name]; dup {
		panic("publish: Register called twice for " + name)
	}
	registry[name] = f
}

// Names are the registered publishers, sorted.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New makes the publisher registered as name (Default when empty) from
// c. An unknown name is an error wrapping relaytype.ErrConfig that lists
// the registered ones.
func New(name string, c Config) (Publisher, error) {
	if name == "" {
		name = Default
	}
	registryMu.RLock()
	f := registry[name]
	registryMu.RUnlock()
	if f == nil {
		return nil, fmt.Errorf("%w: unknown sink %q (registered: %s)", relaytype.ErrConfig, name, strings.Join(Names(), ", "))
	}
	return f(c)
}
