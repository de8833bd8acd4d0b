package kafkapub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// progressFormat is the value of a progress record's HeaderProgress.
const progressFormat = "2"

// Begin begins a Kafka transaction.
func (p *Publisher) Begin(context.Context) error {
	if err := p.prod.Begin(); err != nil {
		return fenced(err)
	}
	p.inTxn = true
	return nil
}

// Commit writes progress as the record of the session's identity on the
// progress topic, in the open transaction, and commits it. When the
// progress record fails the transaction is aborted.
func (p *Publisher) Commit(ctx context.Context, progress []byte) error {
	rec := &kgo.Record{Topic: p.cfg.ProgressTopic, Key: []byte(p.identity), Value: progress,
		Headers: []kgo.RecordHeader{{Key: contract.HeaderProgress, Value: []byte(progressFormat)}}}
	errs, err := p.prod.Produce(ctx, []*kgo.Record{rec})
	if err == nil {
		err = errs[0]
	}
	if err != nil {
		if aerr := p.Abort(ctx); errors.Is(aerr, publish.ErrFenced) {
			return aerr
		}
		return fmt.Errorf("write the progress record: %w", fenced(err))
	}
	err = p.prod.Commit(ctx)
	p.inTxn = false
	return fenced(err)
}

// Abort aborts the open Kafka transaction.
func (p *Publisher) Abort(ctx context.Context) error {
	p.inTxn = false
	return fenced(p.prod.Abort(ctx))
}

// ReadProgress reads identity's last committed progress record written by
// a relay (found false when there is none). It is not a read_committed
// read, which would stop at the oldest transaction open on the progress
// topic, which every slot shares (see producer.ReadLast). Records of the
// identity without HeaderProgress are skipped, each logged and counted as
// not-relay. In a session, progress that relays wrote under another
// incarnation of the same system and slot (the identity's prefix) is
// logged once per key.
func (p *Publisher) ReadProgress(ctx context.Context, identity string) ([]byte, bool, error) {
	pc := p.cfg.Producer
	pc.AutoCreateTopics = false  // reading creates nothing
	var forged, lastForged int64 // records no relay wrote, and the offset of the last one
	byRelay := func(r *kgo.Record) bool {
		for _, h := range r.Headers {
			if h.Key == contract.HeaderProgress {
				return true
			}
		}
		forged, lastForged = forged+1, r.Offset
		if p.m != nil {
			p.m.ProgressIgnored.WithLabelValues("not-relay").Inc()
		}
		return false
	}
	var others []string
	prefix := identity[:max(0, strings.LastIndexByte(identity, '/'))] // the system and slot
	seen := func(r *kgo.Record) {
		k := string(r.Key)
		if k != prefix && !strings.HasPrefix(k, prefix+"/") || slices.Contains(others, k) {
			return
		}
		for _, h := range r.Headers {
			if h.Key == contract.HeaderProgress {
				others = append(others, k)
				return
			}
		}
	}
	v, found, err := producer.ReadLastSeeing(ctx, pc, p.cfg.ProgressTopic, identity, byRelay, seen)
	if forged > 0 {
		p.log.Warn("exactly-once: ignoring records under the slot's progress key that no relay wrote (no "+contract.HeaderProgress+" header): "+
			"something else writes the progress topic", "progress_topic", p.cfg.ProgressTopic, "key", identity, "records", forged, "last_offset", lastForged)
	}
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return nil, false, nil // no relay of the slot ran exactly-once yet
	case err != nil:
		return nil, false, fmt.Errorf("read the progress topic %s: %w", p.cfg.ProgressTopic, err)
	}
	if p.txn && identity == p.identity {
		p.logOthers(identity, others)
	}
	return v, found, nil
}

// logOthers logs, once per key, the progress of other incarnations of the
// identity's system and slot seen in the progress topic.
func (p *Publisher) logOthers(identity string, others []string) {
	for _, k := range others {
		if p.others[k] {
			continue
		}
		p.others[k] = true
		p.log.Warn("exactly-once: the progress topic holds progress of another incarnation of this system and slot "+
			"(a clone of the database, a restored snapshot, a re-created slot, or a relay of before incarnations); "+
			"it is neither read nor fenced by this one", "progress_topic", p.cfg.ProgressTopic, "slot", p.slot,
			"incarnation", incarnationOf(identity), "key", identity, "other_incarnation", incarnationOf(k), "other_key", k)
	}
}

// incarnationOf is the incarnation a progress key names, "none" for a key
// of before incarnations.
func incarnationOf(key string) string {
	if strings.Count(key, "/") < 3 {
		return "none"
	}
	return key[strings.LastIndexByte(key, '/')+1:]
}

// progressTopicError is the session's error for a progress topic t that
// could not be looked up, created or used (EnsureCompactedTopic's err).
func progressTopicError(t string, err error) error {
	var ke *kerr.Error
	switch {
	case errors.Is(err, producer.ErrTopicLayout):
		return relayerr.Permanent(fmt.Errorf("%w: exactly-once: the progress topic %s cannot hold progress: %w; "+
			"it needs one partition and cleanup.policy=compact: set the policy with "+
			"kafka-configs.sh --bootstrap-server BROKER --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact; "+
			"partitions cannot be removed: give --progress-topic a new name (the relay creates it), or delete the topic "+
			"(kafka-topics.sh --bootstrap-server BROKER --delete --topic %s) and let the relay create it "+
			"(each slot's next start then republishes what its state row does not record: duplicates, no loss)",
			relaytype.ErrConfig, t, err, t, t))
	case !errors.As(err, &ke):
		return fmt.Errorf("relay: exactly-once: look up the progress topic %s: %w", t, err)
	}
	return relayerr.Permanent(fmt.Errorf("%w: exactly-once: cannot create the progress topic %s (create it with one partition and cleanup.policy=compact, or grant the relay CreateTopics on it): %w",
		relaytype.ErrConfig, t, err))
}
