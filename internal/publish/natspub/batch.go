package natspub

import (
	"context"
	"errors"
	"maps"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/pgoutbox/pgoutbox/internal/publish"
)

// maxBatch is the most records of one atomic batch: the server's default
// limit (max_batch_size).
const maxBatch = 1000

// errCodeAtomicDisabled is the server's error code for a batch to a
// stream without AllowAtomicPublish (JSAtomicPublishDisabledErr, "atomic
// publish is disabled"); the client names no constant for it.
const errCodeAtomicDisabled jetstream.ErrorCode = 10174

// streams is what a session learned of the streams: the stream of each
// subject, and whether each stream takes atomic batches
// (AllowAtomicPublish). A subject no stream captures (or whose lookup
// failed) is remembered as "" for one Write only, so a stream the
// operator adds is found by the next.
type streams struct {
	ofSubject map[string]string
	atomic    map[string]bool
	// unanswered is set, for the rest of a Write, once a lookup failed
	// other than "no such stream" (the server is away): no more lookups
	// wait for their timeout; the Write's other records go one by one.
	unanswered bool
}

// streamOf is the stream that captures subject when it takes atomic
// batches; "" when none does, or it does not take them, or the server
// did not say.
func (p *Publisher) streamOf(ctx context.Context, subject string) string {
	name, ok := p.streams.ofSubject[subject]
	if !ok && !p.streams.unanswered {
		var err error
		name, err = p.js.StreamNameBySubject(ctx, subject)
		p.streams.unanswered = err != nil && !errors.Is(err, jetstream.ErrStreamNotFound)
		p.streams.ofSubject[subject] = name // "" on an error
	}
	if name == "" {
		return ""
	}
	atomic, ok := p.streams.atomic[name]
	if !ok {
		if p.streams.unanswered {
			return ""
		}
		s, err := p.js.Stream(ctx, name)
		if err != nil {
			p.streams.unanswered = true
			return ""
		}
		atomic = s.CachedInfo().Config.AllowAtomicPublish
		p.streams.atomic[name] = atomic
	}
	if !atomic {
		return ""
	}
	return name
}

// Write publishes recs and waits for the broker's answer to each (see
// publish.Publisher.Write). The records of a stream that takes atomic
// batches (AllowAtomicPublish) go as atomic batches of at most maxBatch,
// in order: the stream stores a batch whole or not at all, and confirms
// it with one acknowledgement. The others are published one by one, in
// order, each confirmed by its PubAck. A repeated message ID within the
// stream's duplicate window is confirmed without a second copy: a batch
// holding one is refused whole by the server, and its records are then
// published one by one, so the new ones are stored and the repeats
// dropped.
func (p *Publisher) Write(ctx context.Context, recs []*publish.Record, out []publish.Outcome) error {
	if p.js == nil {
		return errors.New("nats sink: no session open")
	}
	maps.DeleteFunc(p.streams.ofSubject, func(_, name string) bool { return name == "" })
	p.streams.unanswered = false
	msgs := make([]*nats.Msg, len(recs))
	byStream := map[string][]int{}
	var single []int
	for i, rec := range recs {
		msgs[i] = p.message(rec)
		if name := p.streamOf(ctx, msgs[i].Subject); name != "" {
			byStream[name] = append(byStream[name], i)
		} else {
			single = append(single, i)
		}
	}
	if err := p.writeEach(ctx, msgs, single, out); err != nil {
		return err
	}
	for name, idx := range byStream {
		for start := 0; start < len(idx); start += maxBatch {
			if err := p.writeBatch(ctx, name, msgs, idx[start:min(start+maxBatch, len(idx))], out); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeBatch publishes msgs[idx] as one atomic batch to the stream name
// and sets their outcomes. When the server refuses the batch (a message
// ID it holds, a record it refuses, the stream no longer taking batches)
// or its answer is lost, the records are published one by one instead,
// each with its own outcome: a batch the server stored after all is then
// dropped record by record as duplicates.
func (p *Publisher) writeBatch(ctx context.Context, name string, msgs []*nats.Msg, idx []int, out []publish.Outcome) error {
	if p.guard != nil {
		if err := p.guard(); err != nil {
			return err
		}
	}
	batch := make([]*nats.Msg, len(idx))
	for j, i := range idx {
		batch[j] = msgs[i]
	}
	bctx, cancel := context.WithTimeout(ctx, p.cfg.AckTimeout)
	_, err := jetstreamext.PublishMsgBatch(bctx, p.js, batch)
	cancel()
	switch {
	case err == nil:
		for _, i := range idx {
			out[i] = publish.Outcome{Verdict: publish.Confirmed}
		}
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	var api *jetstream.APIError
	if errors.As(err, &api) && api.ErrorCode == errCodeAtomicDisabled {
		p.streams.atomic[name] = false
	}
	return p.writeEach(ctx, msgs, idx, out)
}

// writeEach publishes msgs[idx] one by one, at most maxInFlight awaiting
// their PubAck at a time, and sets their outcomes.
func (p *Publisher) writeEach(ctx context.Context, msgs []*nats.Msg, idx []int, out []publish.Outcome) error {
	for start := 0; start < len(idx); start += maxInFlight {
		if err := p.writeChunk(ctx, msgs, idx[start:min(start+maxInFlight, len(idx))], out); err != nil {
			return err
		}
	}
	return nil
}
