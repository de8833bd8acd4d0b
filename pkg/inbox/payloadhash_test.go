package inbox_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
)

// A PayloadHash over the stable fields makes a re-emitted event with a new
// timestamp a duplicate instead of a conflict.
func TestPayloadHashOfStableFields(t *testing.T) {
	t.Parallel()
	stable := func(m *inbox.Message) []byte {
		var p struct {
			V int `json:"v"`
		}
		if json.Unmarshal(m.Payload, &p) != nil {
			return inbox.SHA256Payload(m)
		}
		h := sha256.Sum256(fmt.Appendf(nil, "v=%d", p.V))
		return h[:]
	}
	b := inboxtest.Setup(t, &inbox.Config{PayloadHash: stable})
	ctx := context.Background()
	first := inbox.Message{ID: "m-1", BusinessKey: "k-1", Payload: []byte(`{"v":1,"at":"10:00"}`)}
	if res, err := b.In.Process(ctx, first, inboxtest.Effect(first)); err != nil || res.Outcome != inbox.Processed {
		t.Fatalf("first: %+v, %v", res, err)
	}
	retry := inbox.Message{ID: "m-1b", BusinessKey: "k-1", Payload: []byte(`{"v":1,"at":"10:05"}`)}
	if res, err := b.In.Process(ctx, retry, inboxtest.Effect(retry)); err != nil || res.Outcome != inbox.Duplicate {
		t.Fatalf("re-emitted with a new timestamp: %+v, %v", res, err)
	}
	other := inbox.Message{ID: "m-1c", BusinessKey: "k-1", Payload: []byte(`{"v":2,"at":"10:05"}`)}
	if res, err := b.In.Process(ctx, other, inboxtest.Effect(other)); err != nil || res.Reason != inbox.ReasonConflict {
		t.Fatalf("another amount: %+v, %v", res, err)
	}
}
