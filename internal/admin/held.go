package admin

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/sink"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// A recovery publishes only the rows Kafka does not hold. Before it
// publishes, it reads the topics the rows of its range route to (and the
// dead-letter topic) through the sink (Sink.Read), committed records only
// (Kafka: kafkapub.ScanTopics; records of an aborted or open transaction
// are not held), from the range's start minus heldSkew, and collects the message IDs found there with where each was
// found, as relay verify matches rows to records. A row is held only when
// its ID is on the topic it routes to now, or in the dead-letter topic as
// its dead letter (a dlq-reason, and the row's topic as original-topic):
// an ID on the topic of an older routing, or a dead letter from then, is
// published again where the row goes now. A failover with relay recover
// then republishes only what the old primary's relay had not published,
// not the whole margin.

// heldSkew is how far before the range's start the topics are read: a
// record's timestamp is its transaction's commit time (never before the
// row's created_at) on the database's clock, or the broker's clock for
// topics with LogAppendTime.
const heldSkew = relaytype.DefaultVerifyMargin

// maxHeldIDs bounds the message IDs a recovery keeps (about 100 bytes
// each): past it, it stops collecting and publishes the rest whether Kafka
// holds them or not (duplicates, which consumers deduplicate).
const maxHeldIDs = 1_000_000

// heldIDs are the message IDs Kafka holds, by where; a nil *heldIDs holds
// none.
type heldIDs struct {
	ids        map[heldAt]struct{}
	deadLetter string // the dead-letter topic
	skipped    int    // rows has found held
}

// heldAt is a message ID on a topic; for a dead letter, the topic is the
// dead-letter topic and origin its original-topic header.
type heldAt struct {
	id, topic, origin string
}

// heldInKafka reads which rows of opts's range the broker already holds,
// through sk's publisher.
func heldInKafka(ctx context.Context, tx pgx.Tx, c *Config, sk *sink.Sink, opts relaytype.BackfillOptions) (*heldIDs, error) {
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
	h := &heldIDs{ids: make(map[heldAt]struct{}), deadLetter: c.DeadLetters.Topic}
	full := false
	_, err = sk.Read(ctx, slices.Sorted(maps.Keys(topics)), opts.Since.Add(-heldSkew), func(r *publish.Record, _ publish.Place) error {
		if len(h.ids) >= maxHeldIDs {
			full = true
			return nil
		}
		if at, ok := h.at(r); ok {
			h.ids[at] = struct{}{}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if full {
		c.Logger.Warn("recovering: too many records to remember which rows the broker holds; publishing the rest anyway (duplicates)", "slot", c.Slot, "kept", maxHeldIDs)
	}
	c.Logger.Info("recovering: read which rows the broker holds", "slot", c.Slot, "rows", rows, "topics", len(topics), "message_ids", len(h.ids))
	return h, nil
}

// at is where the record r holds its message ID; false for a record
// without one, and for a record of the dead-letter topic that is no dead
// letter (no dlq-reason).
func (h *heldIDs) at(r *publish.Record) (heldAt, bool) {
	at := heldAt{topic: r.Topic}
	var id, reason bool
	for _, hd := range r.Headers {
		switch hd.Key {
		case contract.HeaderMessageID:
			at.id, id = string(hd.Value), true
		case contract.HeaderDLQReason:
			reason = true
		case contract.HeaderOriginalTopic:
			at.origin = string(hd.Value)
		}
	}
	if r.Topic != h.deadLetter {
		at.origin = ""
	} else if !reason {
		return heldAt{}, false
	}
	return at, id
}

// has reports whether Kafka holds ev, counting it: its message ID on the
// topic ev routes to (a valid row), or in the dead-letter topic as its
// dead letter (whose original-topic is ev's topic, cut as a dead letter
// cuts it). A row without a UUID message ID is never held: its records
// carry none that matches it.
func (h *heldIDs) has(ev *decode.Event) bool {
	if h == nil || ev.ID == uuid.Nil {
		return false
	}
	id := ""
	for _, hd := range ev.Record.Headers {
		if hd.Key == contract.HeaderMessageID {
			id = string(hd.Value)
			break
		}
	}
	_, routed := h.ids[heldAt{id: id, topic: ev.Record.Topic}]
	_, dead := h.ids[heldAt{id: id, topic: h.deadLetter, origin: string(contract.Cut([]byte(ev.Record.Topic), contract.MaxTopicBytes))}]
	if (routed && ev.Invalid == nil) || dead {
		h.skipped++
		return true
	}
	return false
}
