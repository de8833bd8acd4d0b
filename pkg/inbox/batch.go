package inbox

import (
	"bytes"
	"context"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
)

// batchEntry remembers a message handled earlier in the same batch.
type batchEntry struct {
	id, key, ref string
	hash         []byte
}

// processBatch handles msgs, in order, in one transaction: one statement
// claims them all, the handler runs for each new one, one statement marks
// them COMPLETED (the claim inserts COMPLETED rows, invisible until the
// commit; only result references are written afterwards), one commit. It is
// the consumer loop's fast path for partitions with a backlog. Anything but
// Processed or Duplicate (a handler error, a conflict, a retry or lease to
// take over, a database error) rolls the whole batch back and returns ok
// false: the caller then handles the messages one at a time, where every
// outcome has its full treatment.
func (in *Inbox[TTx]) processBatch(ctx context.Context, msgs []Message, handler TxHandler[TTx]) (results []Result, ok bool) {
	start := time.Now()
	in.metrics.inFlight.Add(float64(len(msgs)))
	defer func() {
		if !ok {
			// The one-at-a-time path accounts for these deliveries.
			in.metrics.inFlight.Sub(float64(len(msgs)))
		}
	}()
	tx, err := in.db.Begin(ctx)
	if err != nil {
		return nil, false
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	n := len(msgs)
	ids, keys, topics := make([]string, n), make([]string, n), make([]string, n)
	hashes, parts, offs := make([][]byte, n), make([]int32, n), make([]int64, n)
	for i, m := range msgs {
		ids[i], keys[i], hashes[i], topics[i], parts[i], offs[i] = m.ID, m.BusinessKey, in.hash(&msgs[i]), m.Topic, int32(m.Partition), m.Offset
	}
	rows, err := tx.Query(ctx, in.queries.claimBatch, in.cfg.Consumer, ids, keys, hashes, topics, parts, offs)
	claimed, err := dbdriver.Collect(rows, err, func(r dbdriver.Rows) (id string, err error) {
		err = r.Scan(&id)
		return id, err
	})
	if err != nil {
		return nil, false
	}
	fresh := make(map[string]bool, len(claimed))
	for _, id := range claimed {
		fresh[id] = true
	}

	results = make([]Result, n)
	byID := make(map[string]*batchEntry, n)
	byKey := make(map[string]*batchEntry, n)
	var doneIDs, refs []string
	for i := range msgs {
		m := &msgs[i]
		if fresh[m.ID] {
			delete(fresh, m.ID) // a second copy in this batch is a duplicate
			ref, herr := in.runTx(ctx, m, tx, handler)
			if herr != nil {
				return nil, false
			}
			e := &batchEntry{id: m.ID, key: m.BusinessKey, ref: ref, hash: hashes[i]}
			byID[m.ID], byKey[m.BusinessKey] = e, e
			if ref != "" {
				doneIDs, refs = append(doneIDs, m.ID), append(refs, ref)
			}
			results[i] = Result{Outcome: Processed, Status: StatusCompleted, Attempts: 1, ResultRef: ref}
			continue
		}
		// Seen earlier in this batch: its row is not COMPLETED yet.
		e := byID[m.ID]
		if e == nil {
			e = byKey[m.BusinessKey]
		}
		if e != nil {
			if e.key != m.BusinessKey || !bytes.Equal(e.hash, hashes[i]) {
				return nil, false // a conflict
			}
			results[i] = Result{Outcome: Duplicate, Status: StatusCompleted, Attempts: 1, ResultRef: e.ref}
			continue
		}
		c, err := in.claimTx(ctx, tx, m, hashes[i], 0, false)
		if err != nil || c.done == nil || c.done.Outcome != Duplicate {
			return nil, false
		}
		results[i] = *c.done
	}
	if len(doneIDs) > 0 {
		if _, err := tx.Exec(ctx, in.queries.completeBatch, in.cfg.Consumer, doneIDs, refs); err != nil {
			return nil, false
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, false
	}
	for i := range msgs {
		in.observeAge(&msgs[i], start)
		_, _ = in.finish(ctx, &msgs[i], start, results[i], nil)
	}
	return results, true
}
