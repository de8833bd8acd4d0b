package loophook_test

import (
	"testing"

	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/loophook"
)

// hook names the embedded Hook unexported, as package inbox does.
type hook = loophook.Hook

// owner stands for an Inbox of another package.
type owner struct {
	hook
}

// Internals finds the Hook an owner of another package embeds, and hands
// out nil for a zero Hook or a value without one.
func TestInternals(t *testing.T) {
	t.Parallel()
	o := &owner{hook: loophook.New(func() any { return "internals" })}
	if got := loophook.Internals(o); got != "internals" {
		t.Errorf("embedding owner: %v", got)
	}
	if got := loophook.Internals(&owner{}); got != nil {
		t.Errorf("zero Hook: %v", got)
	}
	if got := loophook.Internals(owner{}); got != nil {
		t.Errorf("owner by value: %v", got)
	}
	if got := loophook.Internals("other"); got != nil {
		t.Errorf("other value: %v", got)
	}
}
