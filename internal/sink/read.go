package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Read reads what the broker holds in dests through the publisher's read
// side (publish.Reader): recovery's "already there". A publisher without
// one fails it.
func (s *Sink) Read(ctx context.Context, dests []string, since time.Time, each func(*publish.Record, publish.Place) error) (publish.Holdings, error) {
	if s.pubErr != nil {
		return publish.Holdings{}, s.pubErr
	}
	r, ok := s.pub.(publish.Reader)
	if !ok {
		return publish.Holdings{}, relayerr.Permanent(fmt.Errorf("%w: the %s sink cannot read back what it holds", relaytype.ErrConfig, s.cfg.Publisher))
	}
	return r.Read(ctx, dests, since, each)
}
