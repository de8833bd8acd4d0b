package admin

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/verify"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// A recovery publishes only the rows Kafka does not hold. Before it
// publishes, it reads the topics the rows of its range route to (and the
// dead-letter topic), read_committed, from the range's start minus
// heldSkew, and collects the message IDs found there, as relay verify
// matches rows to records. A failover with relay recover then republishes
// only what the old primary's relay had not published, not the whole
// margin.

// heldSkew is how far before the range's start the topics are read: a
// record's timestamp is its transaction's commit time (never before the
// row's created_at) on the database's clock, or the broker's clock for
// topics with LogAppendTime.
const heldSkew = verify.DefaultMargin

// maxHeldIDs bounds the message IDs a recovery keeps (about 100 bytes
// each): past it, it stops collecting and publishes the rest whether Kafka
// holds them or not (duplicates, which consumers deduplicate).
const maxHeldIDs = 1_000_000

// heldIDs are the message IDs Kafka holds; a nil *heldIDs holds none.
type heldIDs struct {
	ids     map[string]struct{}
	skipped int // rows has found held
}

// heldInKafka reads which rows of opts's range Kafka already holds.
func heldInKafka(ctx context.Context, tx pgx.Tx, c *Config, opts relaytype.BackfillOptions) (*heldIDs, error) {
	topics := map[string]struct{}{c.DeadLetters.Topic: {}}
	rows := 0
	err := eachRow(ctx, tx, c, opts, func(ev decode.Event, _ time.Time) error {
		rows++
		if ev.Invalid == nil {
			topics[ev.Record.Topic] = struct{}{}
		}
		return nil
	})
	if err != nil || rows == 0 {
		return nil, err
	}
	h := &heldIDs{ids: make(map[string]struct{})}
	kopts := producer.ClientOpts(c.Sink.Producer)
	full := false
	_, err = verify.ScanTopics(ctx, kopts, slices.Sorted(maps.Keys(topics)), opts.Since.Add(-heldSkew), c.Logger, func(r *kgo.Record) error {
		if len(h.ids) >= maxHeldIDs {
			full = true
			return nil
		}
		for _, hd := range r.Headers {
			if hd.Key == contract.HeaderMessageID {
				h.ids[string(hd.Value)] = struct{}{}
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if full {
		c.Logger.Warn("recovering: too many records to remember which rows Kafka holds; publishing the rest anyway (duplicates)", "slot", c.Slot, "kept", maxHeldIDs)
	}
	c.Logger.Info("recovering: read which rows Kafka holds", "slot", c.Slot, "rows", rows, "topics", len(topics), "message_ids", len(h.ids))
	return h, nil
}

// has reports whether Kafka holds ev (by its message ID), counting it.
// A row without a UUID message ID is never held: its records carry none
// that matches it.
func (h *heldIDs) has(ev *decode.Event) bool {
	if h == nil || ev.ID == uuid.Nil {
		return false
	}
	for _, hd := range ev.Record.Headers {
		if hd.Key == contract.HeaderMessageID {
			if _, ok := h.ids[string(hd.Value)]; ok {
				h.skipped++
				return true
			}
			return false
		}
	}
	return false
}
