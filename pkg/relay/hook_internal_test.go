package relay

import (
	"context"
	"slices"
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/hookcall"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relayhook"
)

// nopHook takes built records and does nothing with them.
type nopHook struct{ name string }

func (*nopHook) OnRecordBuilt(relayhook.RecordBuilt) {}

// A run's hooks are the relay's messaging metrics, Config.Hooks and the
// hooks the run's context carries already (the relay benchmark's trace),
// each once.
func TestRunHooks(t *testing.T) {
	t.Parallel()
	own, outer := &nopHook{"config"}, &nopHook{"context"}
	r, err := New(&Config{DatabaseURL: "postgres://localhost/db", Kafka: KafkaConfig{Brokers: []string{"localhost:9092"}}, Hooks: []relayhook.Hook{own}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want []relayhook.Hook
	}{
		{"config", context.Background(), []relayhook.Hook{r.m.Messaging, own}},
		{"config and context", hookcall.WithHooks(context.Background(), hookcall.New([]relayhook.Hook{outer})), []relayhook.Hook{r.m.Messaging, own, outer}},
	} {
		got := hookcall.FromContext(r.withHooks(tc.ctx)).Hooks()
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: hooks %v, want %v", tc.name, got, tc.want)
		}
		if hookcall.FromContext(r.withHooks(tc.ctx)).ForReader() == nil {
			t.Errorf("%s: no hook for the reader", tc.name)
		}
	}
	r2, err := New(&Config{DatabaseURL: "postgres://localhost/db", Kafka: KafkaConfig{Brokers: []string{"localhost:9092"}}})
	if err != nil {
		t.Fatal(err)
	}
	if h := hookcall.FromContext(r2.withHooks(context.Background())); h == nil || h.ForReader() != nil {
		t.Errorf("without Config.Hooks: hooks %v; want the metrics only, none for the reader", h.Hooks())
	}
}
