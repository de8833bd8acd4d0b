package relay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Reading from a physical standby is refused before anything is made,
// with the reason and the fix (the primary, or every host with
// target_session_attrs=read-write): the relay keeps its state row where it
// reads, and decoding on a standby (PG 16+) is not supported yet.
func TestRefusesAStandby(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary := testenv.NewServer(t)
	standby, err := primary.StartStandby(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Stop)
	cfg := &relay.Config{DatabaseURL: standby.AdminURL, Logger: testLogger(t)}
	for name, call := range map[string]func(context.Context, *relay.Config) error{
		"CheckPrerequisites": relay.CheckPrerequisites,
		"Setup":              relay.Setup,
	} {
		err := call(ctx, cfg)
		var pe *relaytype.PrerequisitesError
		if !errors.As(err, &pe) || checks(pe.Problems) != "primary" || !strings.Contains(pe.Problems[0].Fix, "target_session_attrs=read-write") {
			t.Errorf("%s on a standby: %v, want one problem, primary, naming target_session_attrs=read-write", name, err)
		}
	}
}
