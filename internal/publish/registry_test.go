package publish_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// nop is a publisher that confirms everything and keeps nothing.
type nop struct{ cfg publish.Config }

func (nop) Open(context.Context, publish.Session) error { return nil }
func (nop) Write(_ context.Context, recs []*publish.Record, out []publish.Outcome) error {
	clear(out[:len(recs)])
	return nil
}
func (nop) Close() {}

// registryRuns numbers TestRegistry's runs: the registry is the
// process's, and go test -count=N runs the test again in it.
var registryRuns atomic.Int64

// A registered publisher is made by its name with the config it is
// given; the empty name is the default, Kafka; an unknown name is a
// configuration error naming the registered ones; a second registration
// of a name panics.
func TestRegistry(t *testing.T) {
	name := fmt.Sprintf("test-nop-%d", registryRuns.Add(1))
	publish.Register(name, func(c publish.Config) (publish.Publisher, error) { return nop{c}, nil })
	if !slices.Contains(publish.Names(), name) {
		t.Fatalf("names %v", publish.Names())
	}
	p, err := publish.New(name, publish.Config{Slot: "s"})
	if err != nil || p.(nop).cfg.Slot != "s" {
		t.Fatalf("New: %v, %v", p, err)
	}
	out := []publish.Outcome{{Verdict: publish.Retry}}
	if err := p.Write(context.Background(), []*publish.Record{{Topic: "t", Timestamp: time.Now()}}, out); err != nil || out[0].Verdict != publish.Confirmed {
		t.Fatalf("Write: %v, %+v", err, out)
	}
	_, err = publish.New("nope", publish.Config{})
	if !errors.Is(err, relaytype.ErrConfig) {
		t.Fatalf("unknown: %v, want ErrConfig", err)
	}
	_, err = publish.New("", publish.Config{})
	if !errors.Is(err, relaytype.ErrConfig) { // kafka is not registered in this test binary
		t.Fatalf("default without kafka: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a second Register of a name did not panic")
		}
	}()
	publish.Register(name, func(publish.Config) (publish.Publisher, error) { return nop{}, nil })
}
