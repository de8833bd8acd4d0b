package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/hookcall"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relayhook"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Exactly-once mode (Config.ExactlyOnce): each flush of the sink is one
// transaction of a publish.Transactional (Kafka's: internal/publish/kafkapub)
// holding its records and the progress, the slot's identity → how far the
// relay got, which the publisher stores where no row can write it (Kafka:
// a record on a compacted progress topic). The loop decides what a
// transaction covers and the progress it commits; the publisher commits. A Kafka
// transaction ends with a WAL transaction, or, inside a WAL transaction
// that takes longer to publish than half the transaction timeout, after a
// batch: its progress then also names the position inside that
// transaction (Progress.Part), so a restart resumes there. Events are
// acknowledged (and the slot confirmed) only when their Kafka transaction
// commits. A session starts by initialising the slot's transactional ID
// (which fences any older relay of the slot and aborts what it left open)
// and reading the committed progress, through which it skips the WAL it
// replays.
//
// Progress is trusted only when a relay wrote it (contract.HeaderProgress,
// which no row may carry), for this slot's history (the state row's system
// identifier, timeline and slot creation LSN), not past the server's WAL,
// and not past what the state row records (its ceiling): anything else
// could skip rows Kafka does not hold. The last holds because a commit
// waits, before it commits, until the row's ceiling covers the progress
// it records (Sink.Recorded): a disk snapshot restored over the server
// rolls the row back with the WAL, and the progress Kafka kept from after
// the snapshot is then past it (duplicates, no skip).
//
// The progress key and the transactional ID carry the slot's incarnation,
// a random identity made with the slot and kept in the state row, so that
// a re-created slot, or a clone of the database that re-created its own,
// shares neither with the original. A file-level clone (or a restored
// snapshot) copies the row, incarnation included: the first session that
// finds progress under its key past what its database records
// (ErrForeignProgress) gives its row a new incarnation, so that the two
// part from then on, and the old progress, never read again, cannot turn
// trusted later when the server's WAL and ceiling pass it. Progress of
// another incarnation of the same system and slot seen in the progress
// topic is logged once, naming both.

// progress is the value of a progress record.
type progress struct {
	Slot             string        `json:"slot"`
	SystemIdentifier string        `json:"system_identifier"`
	Timeline         int32         `json:"timeline"`
	SlotCreatedLSN   string        `json:"slot_created_lsn"`
	Incarnation      string        `json:"incarnation,omitempty"`
	EndLSN           string        `json:"end_lsn"`
	CommitTime       time.Time     `json:"commit_time"`
	Part             *progressPart `json:"part,omitempty"`
}

// progressPart is the part of a WAL transaction a progress record covers:
// its first Events events.
type progressPart struct {
	FinalLSN string `json:"final_lsn"`
	Events   int    `json:"events"`
}

// Progress is what the exactly-once relays of a slot committed:
// every WAL transaction that ends at or before EndLSN and, when Part.Seq
// is above 0, the events before Part.Seq of the transaction whose commit
// record starts at Part.Final.
type Progress struct {
	EndLSN     pglogrepl.LSN
	Part       publish.Position
	CommitTime time.Time
}

// History is the WAL history a slot's progress belongs to, as its state
// row records it: the server, its timeline, the slot's creation and its
// incarnation.
type History struct {
	SystemID       string
	Timeline       int32
	SlotCreatedLSN pglogrepl.LSN
	Incarnation    string
}

// String names the server, the timeline, the slot creation and the
// incarnation.
func (h History) String() string {
	return fmt.Sprintf("system %s, timeline %d, slot created at %s, incarnation %s", h.SystemID, h.Timeline, h.SlotCreatedLSN, h.Incarnation)
}

// ProgressKey is the progress record key, and the transactional ID, of
// the incarnation of a slot on the server of system identifier systemID:
// the same for every relay of the slot, across restarts and timelines,
// until the slot is created anew or the relay finds that another database
// shares it (see ErrForeignProgress).
func ProgressKey(systemID, slot, incarnation string) string {
	return "pgoutbox-relay/" + systemID + "/" + slot + "/" + incarnation
}

// WriterKey names the WAL history h of slot for a broker that
// deduplicates per writer (publish.Session.Slot): the progress key and
// the timeline, since a promoted standby can write new WAL at positions
// the old timeline already published (the state row, and so the
// incarnation, came over with the standby).
func WriterKey(slot string, h History) string {
	return ProgressKey(h.SystemID, slot, h.Incarnation) + "/" + strconv.Itoa(int(h.Timeline))
}

// ErrForeignProgress is OpenExactlyOnce's error when the progress under
// the session's key is past what its database records (the server's WAL or
// the state row's ceiling): a clone of the database, or the primary a
// restored snapshot was taken of, shares the slot's incarnation. The
// caller gives the state row a new incarnation and opens again.
var ErrForeignProgress = errors.New("relay: exactly-once: the progress under the slot's key was written for WAL this database does not record")

// eosState is the sink's exactly-once state.
type eosState struct {
	key     string
	history History
	open    bool         // a Kafka transaction is open
	began   time.Time    // when it began
	acks    []pendingAck // what it holds, acknowledged at its commit
	// committed is set when the last publish committed the transaction.
	committed bool
	// lastEnd and lastCommit are the end LSN and commit time of the
	// last WAL transaction written whole; part is how much of the
	// following one was written (Seq 0: none).
	lastEnd    uint64
	lastCommit time.Time
	part       publish.Position
	// redo remembers, across sessions, records Kafka refused for their
	// own sake, by WAL position: once refused for good (as at-least-once
	// mode judges), the session that reads them again dead-letters them
	// (or stops) before writing; a dead letter refused for good in turn
	// becomes the minimal one, and a minimal one refused stops the relay
	// (see refusal.shaped).
	redo map[publish.Position]refusal
}

// refusal is what a session learnt of a record Kafka refused: the
// refusals of its current form (out the latest), and the outcomes its
// earlier forms were refused for good with.
type refusal struct {
	out      publish.Outcome
	attempts int
	since    time.Time // the first refusal of the current form
	final    bool      // refused for good at once (OwnFault, an expired topic)
	// shaped holds, in order, the outcomes each earlier form of the record
	// was refused for good with: the session that reads the row again
	// rejects it once per outcome (Sink.reject: the row becomes its dead
	// letter, the dead letter the minimal one, the minimal one stops the
	// relay), as at-least-once mode does within one write.
	shaped []publish.Outcome
}

// due reports whether the record is to be dead-lettered in place: refused
// for good, or refused rejectAttempts times over at least rejectAfter.
func (r refusal) due() bool {
	return r.final || r.attempts >= rejectAttempts && time.Since(r.since) >= rejectAfter
}

// maxRefusals bounds eosState.redo: it is cleared when full (the records
// are then retried as if never refused).
const maxRefusals = 10_000

// escalated is r once its current form is rejected in place: the next
// form's refusals start from none.
func (r refusal) escalated() refusal {
	return refusal{shaped: append(r.shaped[:len(r.shaped):len(r.shaped)], r.out)}
}

// refuse records that the broker refused ev with o; final when for good.
func (e *eosState) refuse(ev *decode.Event, o publish.Outcome, final bool) {
	r, ok := e.redo[ev.Record.Pos]
	if !ok && len(e.redo) >= maxRefusals {
		clear(e.redo)
	}
	if r.attempts == 0 {
		r.since = time.Now()
	}
	r.out, r.final = o, r.final || final
	r.attempts++
	e.redo[ev.Record.Pos] = r
}

// pendingAck is one transaction's events in an open Kafka transaction.
type pendingAck struct {
	tx     acktrack.TxID
	n      int
	commit time.Time
}

// errTxnAborted ends a session whose Kafka transaction was aborted: the
// next session reads the committed progress and writes from there.
var errTxnAborted = errors.New("relay: exactly-once: kafka transaction aborted")

// OpenExactlyOnce opens a transactional session of the publisher for the
// slot history h, fencing older relays of the slot, and returns the
// committed progress that may be trusted (zero when none): written by a
// relay, for h, not past walEnd, the server's current WAL position, and
// not past recorded, the state row's ceiling. Progress past either ends
// it with ErrForeignProgress.
func (s *Sink) OpenExactlyOnce(ctx context.Context, h History, walEnd, recorded pglogrepl.LSN) (Progress, error) {
	c := &s.cfg
	key := ProgressKey(h.SystemID, c.Slot, h.Incarnation)
	if s.pubErr == nil {
		if _, ok := s.pub.(publish.Transactional); !ok {
			return Progress{}, relayerr.Permanent(fmt.Errorf("%w: exactly-once: the %s sink has no transactions", relaytype.ErrConfig, c.Publisher))
		}
	}
	if s.eos == nil || s.eos.key != key {
		s.eos = &eosState{key: key, redo: make(map[publish.Position]refusal)}
	}
	e := s.eos
	e.history = h
	e.open, e.acks, e.lastEnd, e.part = false, e.acks[:0], 0, publish.Position{}
	if err := s.openWith(ctx, publish.Session{Identity: key, Slot: WriterKey(c.Slot, h)}); err != nil {
		if errors.Is(err, publish.ErrFenced) {
			return Progress{}, s.txnError("open", err)
		}
		return Progress{}, err
	}
	p, err := readProgress(ctx, c, s.txn(), s.m.ProgressIgnored, key)
	if err != nil {
		return Progress{}, err
	}
	committed, reason := trustProgress(c, s.m.ProgressIgnored, p, h, walEnd, recorded)
	if reason == "beyond-wal" || reason == "beyond-state" {
		return Progress{}, fmt.Errorf("%w (%s, key %s)", ErrForeignProgress, reason, key)
	}
	// A part written first in this session (the rest of a transaction
	// committed in parts) still says where the whole ones end.
	e.lastEnd, e.lastCommit = uint64(committed.EndLSN), committed.CommitTime
	c.Logger.Info("exactly-once: committed progress", "progress_topic", c.ProgressTopic, "key", key,
		"end_lsn", committed.EndLSN.String(), "part_of", committed.Part.Final.String(), "part_events", committed.Part.Seq)
	s.m.ProgressLSN.Set(float64(committed.EndLSN))
	return committed, nil
}

// txn is the publisher as the transactional one it is in exactly-once
// mode.
func (s *Sink) txn() publish.Transactional { return s.pub.(publish.Transactional) }

// readProgress reads key's last committed progress through the
// publisher, zero when there is none; an unreadable one is logged and
// counted in ignored (when set) and read as none.
func readProgress(ctx context.Context, c *Config, txn publish.Transactional, ignored *prometheus.CounterVec, key string) (p progress, err error) {
	v, found, err := txn.ReadProgress(ctx, key)
	switch {
	case err != nil:
		return p, fmt.Errorf("relay: exactly-once: %w", err)
	case !found:
		return p, nil
	}
	if err := json.Unmarshal(v, &p); err != nil {
		c.Logger.Warn("exactly-once: ignoring an unreadable progress record", "progress_topic", c.ProgressTopic, "key", key, "error", err)
		if ignored != nil {
			ignored.WithLabelValues("unreadable").Inc()
		}
		return progress{}, nil
	}
	return p, nil
}

// trustProgress is the part of p a session may skip through (see
// judgeProgress), and why p was not trusted (empty when it was); an
// untrusted p is logged and counted in ignored by its reason.
func trustProgress(c *Config, ignored *prometheus.CounterVec, p progress, h History, walEnd, recorded pglogrepl.LSN) (Progress, string) {
	got, j := judgeProgress(p, h, walEnd, recorded)
	if j.reason == "" {
		return got, ""
	}
	c.Logger.Warn("exactly-once: not skipping by the committed progress: "+j.why+"; the session resumes from the state row (duplicates, no loss)",
		append(j.attrs, "progress_topic", c.ProgressTopic, "slot", c.Slot)...)
	ignored.WithLabelValues(j.reason).Inc()
	return Progress{}, j.reason
}

// judgement is why judgeProgress does not trust a progress record: its
// reason (the progress_ignored_total label, empty when trusted), a
// sentence and the values that show it.
type judgement struct {
	reason, why string
	attrs       []any
}

// judgeProgress is the part of p a session may skip through: p when it
// belongs to history h, is not past walEnd (the server's WAL) and not past
// recorded (the state row's ceiling: see Sink.Recorded), zero (skip
// nothing beyond the state row) otherwise, with the judgement. No
// progress at all is trusted (it skips nothing).
func judgeProgress(p progress, h History, walEnd, recorded pglogrepl.LSN) (Progress, judgement) {
	if p.EndLSN == "" {
		return Progress{}, judgement{}
	}
	got, err := p.parse()
	switch ph := p.history(); {
	case err != nil:
		return Progress{}, judgement{"unreadable", "the progress record does not parse", []any{"error", err}}
	case ph != h:
		return Progress{}, judgement{"other-history", "it belongs to another history of the slot (a failover, a restore, a recovery or a re-created slot)",
			[]any{"progress_history", ph.String(), "state_history", h.String()}}
	case got.EndLSN > walEnd || got.Part.Final > walEnd:
		return Progress{}, judgement{"beyond-wal", "it is past the server's current WAL position",
			[]any{"end_lsn", got.EndLSN.String(), "part_of", got.Part.Final.String(), "server_wal", walEnd.String()}}
	case got.EndLSN > recorded || got.Part.Final > recorded:
		return Progress{}, judgement{"beyond-state", "it is past what the state row records (a disk snapshot or backup restored over the server)",
			[]any{"end_lsn", got.EndLSN.String(), "part_of", got.Part.Final.String(), "state_ceiling", recorded.String()}}
	}
	return got, judgement{}
}

// history is the slot history p names.
func (p *progress) history() History {
	created, _ := pglogrepl.ParseLSN(p.SlotCreatedLSN)
	return History{SystemID: p.SystemIdentifier, Timeline: p.Timeline, SlotCreatedLSN: created, Incarnation: p.Incarnation}
}

// parse reads p's positions.
func (p *progress) parse() (Progress, error) {
	end, err := pglogrepl.ParseLSN(p.EndLSN)
	if err != nil {
		return Progress{}, fmt.Errorf("end_lsn: %w", err)
	}
	if _, err := pglogrepl.ParseLSN(p.SlotCreatedLSN); err != nil {
		return Progress{}, fmt.Errorf("slot_created_lsn: %w", err)
	}
	got := Progress{EndLSN: end, CommitTime: p.CommitTime}
	if p.Part != nil {
		final, err := pglogrepl.ParseLSN(p.Part.FinalLSN)
		if err != nil || p.Part.Events < 0 {
			return Progress{}, fmt.Errorf("part: final_lsn %q, events %d", p.Part.FinalLSN, p.Part.Events)
		}
		got.Part = publish.Position{Final: final, Seq: p.Part.Events}
	}
	return got, nil
}

// progressValue is the progress of a transaction holding the WAL
// transactions through end (the last committed at commit), and the events
// before part.Seq of the transaction at part.Final.
func (s *Sink) progressValue(end uint64, commit time.Time, part publish.Position) []byte {
	h := s.eos.history
	p := progress{Slot: s.cfg.Slot, SystemIdentifier: h.SystemID, Timeline: h.Timeline, SlotCreatedLSN: h.SlotCreatedLSN.String(),
		Incarnation: h.Incarnation, EndLSN: pglogrepl.LSN(end).String(), CommitTime: commit}
	if part.Seq > 0 {
		p.Part = &progressPart{FinalLSN: part.Final.String(), Events: part.Seq}
	}
	v, _ := json.Marshal(p)
	return v
}

// ReadProgressStatus reads the committed progress of c's slot of history
// h, for Status, and judges it as a session starting now would, against
// the server's WAL and the state row's ceiling that bounds reads after the
// progress: a running relay raises the ceiling before each commit, so
// bounds read before the progress could be passed by a commit in between
// and make good progress look untrusted. A failure is reported in the
// result's Error.
func ReadProgressStatus(ctx context.Context, c *Config, h History, bounds func() (walEnd, recorded pglogrepl.LSN, err error)) *relaytype.ProgressStatus {
	ps := &relaytype.ProgressStatus{Topic: c.ProgressTopic, Key: ProgressKey(h.SystemID, c.Slot, h.Incarnation)}
	pub, err := newPublisher(c, nil)
	txn, ok := pub.(publish.Transactional)
	if err == nil && !ok {
		err = fmt.Errorf("%w: the %s sink has no transactions", relaytype.ErrConfig, c.Publisher)
	}
	if err != nil {
		ps.Error = err.Error()
		return ps
	}
	p, err := readProgress(ctx, c, txn, nil, ps.Key)
	if err != nil {
		ps.Error = err.Error()
		return ps
	}
	walEnd, recorded, err := bounds()
	if err != nil {
		ps.Error = err.Error()
		return ps
	}
	if got, err := p.parse(); err == nil && p.EndLSN != "" {
		ps.Found, ps.CommittedLSN = true, got.EndLSN.String()
		t := p.CommitTime
		ps.CommitTime = &t
	}
	_, j := judgeProgress(p, h, walEnd, recorded)
	switch {
	case p.EndLSN == "":
		ps.Trust = "no progress committed: a session resumes from the state row"
	case j.reason == "":
		ps.Trusted = true
		ps.Trust = fmt.Sprintf("written by a relay for this history of the slot (%s), within the server's WAL (%s) and the state row's ceiling (%s)",
			h, walEnd, recorded)
	default:
		ps.Trust = fmt.Sprintf("not trusted (%s): %s", j.reason, j.why)
		for i := 0; i+1 < len(j.attrs); i += 2 {
			ps.Trust += fmt.Sprintf(", %v %v", j.attrs[i], j.attrs[i+1])
		}
		ps.Trust += "; a session resumes from the state row (duplicates, no loss)"
		if j.reason == "beyond-wal" || j.reason == "beyond-state" {
			ps.Trust += ", under a new incarnation of the slot"
		}
	}
	return ps
}

// txnError is the session's error for a failed transactional call. Either
// way the session ends and nothing of the open transaction is
// acknowledged; the next one initialises the producer again (fencing
// whoever holds the transactional ID, or waiting as a standby when
// another relay holds the slot) and starts from the committed progress. A
// fenced producer wraps ErrFenced: a newer relay of the slot, or the
// brokers aborting a transaction that outlasted the transaction timeout
// (both answer with an epoch error). The slot, not the epoch, tells which:
// only the relay streaming the slot can commit.
func (s *Sink) txnError(what string, err error) error {
	if errors.Is(err, publish.ErrFenced) {
		return fmt.Errorf("%w: %s (transaction timeout %v): %w", relaytype.ErrFenced, what, s.cfg.TransactionTimeout, err)
	}
	return fmt.Errorf("%w: %s: %w", errTxnAborted, what, err)
}

// transactional is the exactly-once publisher: publishTxn, then what a
// commit made visible is acknowledged (nothing while a WAL transaction
// goes on in the next batch).
type transactional struct{ *Sink }

func (p transactional) publish(ctx context.Context, batch []decode.Event) error {
	committed, err := p.publishTxn(ctx, batch)
	p.eos.committed = committed
	return err
}

func (p transactional) ack(_ []decode.Event, tr *acktrack.Tracker) {
	if p.eos.committed {
		p.acknowledgeTxn(tr)
	}
}

// due is when the open transaction is to be committed though no batch
// came (a long decode gap inside a WAL transaction): half the transaction
// timeout after it began, as publishTxn splits; zero when none is open.
func (p transactional) due() time.Time {
	if !p.eos.open {
		return time.Time{}
	}
	return p.eos.began.Add(p.cfg.TransactionTimeout / 2)
}

// flush commits the open transaction with the part of the WAL
// transaction written so far, before the brokers time it out.
func (p transactional) flush(ctx context.Context) error {
	committed, err := p.commitPart(ctx)
	p.eos.committed = committed
	return err
}

// txnBatch is a batch as one write of a transaction: its records, the
// batch index of each, and where the transaction stands after it.
type txnBatch struct {
	recs       []*publish.Record
	idx        []int
	lastEnd    uint64
	lastCommit time.Time
	part       publish.Position
	// ends is set when the batch ends at the end of a WAL transaction,
	// split when the transaction is to be committed inside one; either
	// way progress is the progress to commit with it.
	ends, split bool
	progress    []byte
}

// publishTxn writes batch into the open Kafka transaction (beginning one
// when none is), and commits it when batch ends at the end of a WAL
// transaction, or when the transaction has been open for half the
// transaction timeout (a large WAL transaction is committed in parts),
// with the progress. It reports whether it committed. A record that fails aborts
// the transaction and ends the session (a record Kafka refused for its own
// sake is remembered by its WAL position, for a later session to
// dead-letter in its place once refused for good); nothing of the
// transaction is then acknowledged.
func (s *Sink) publishTxn(ctx context.Context, batch []decode.Event) (committed bool, err error) {
	s.m.BatchSize.Observe(float64(len(batch)))
	e := s.eos
	if !e.open {
		if err := s.txn().Begin(ctx); err != nil {
			return false, s.txnError("begin a transaction", err)
		}
		e.open, e.began = true, time.Now()
	}
	tb, err := s.txnRecords(batch)
	defer func() { clear(tb.recs); s.recs = tb.recs[:0] }()
	if err != nil {
		return false, err
	}
	if err := s.produceTxn(ctx, batch, &tb); err != nil {
		return false, err
	}
	e.lastEnd, e.lastCommit, e.part = tb.lastEnd, tb.lastCommit, tb.part
	e.hold(batch)
	if !tb.ends && !tb.split {
		return false, nil // a WAL transaction goes on in the next batch
	}
	if err := s.commitTxn(ctx, tb.progress); err != nil {
		return false, err
	}
	return true, nil
}

// commitPart commits the open transaction, if any, with a progress record
// of what it holds (the part of a WAL transaction written so far), and
// reports whether it committed.
func (s *Sink) commitPart(ctx context.Context) (committed bool, err error) {
	e := s.eos
	if !e.open {
		return false, nil
	}
	if err := s.commitTxn(ctx, s.progressValue(e.lastEnd, e.lastCommit, e.part)); err != nil {
		return false, err
	}
	return true, nil
}

// txnRecords lays batch out as one write: its records in order
// (dead-lettering in place those a former session saw refused for good),
// and the progress when the transaction is to be committed.
func (s *Sink) txnRecords(batch []decode.Event) (txnBatch, error) {
	e := s.eos
	tb := txnBatch{recs: s.recs[:0], idx: make([]int, 0, len(batch)+1), lastEnd: e.lastEnd, lastCommit: e.lastCommit, part: e.part}
	for i := range batch {
		ev := &batch[i]
		if ev.Marker {
			tb.lastEnd, tb.lastCommit, tb.part = ev.EndLSN, ev.Commit, publish.Position{}
			continue
		}
		if r, ok := e.redo[ev.Record.Pos]; ok {
			if r.due() {
				r = r.escalated()
				e.redo[ev.Record.Pos] = r
			}
			for _, ro := range r.shaped {
				if err := s.reject(ev, &recordState{}, ro); err != nil {
					return tb, err
				}
			}
		}
		tb.part = publish.Position{Final: ev.Record.Pos.Final, Seq: ev.Record.Pos.Seq + 1}
		tb.recs = append(tb.recs, &ev.Record)
		tb.idx = append(tb.idx, i)
	}
	tb.ends = len(batch) > 0 && batch[len(batch)-1].Marker
	// Commit inside a WAL transaction before the brokers time the
	// transaction out (Kafka's abort it at TransactionTimeout).
	tb.split = !tb.ends && time.Since(e.began) >= s.cfg.TransactionTimeout/2
	if tb.ends || tb.split {
		tb.progress = s.progressValue(tb.lastEnd, tb.lastCommit, tb.part)
	}
	return tb, nil
}

// produceTxn writes tb's records in one write, guarded, and judges them:
// a failed record aborts the transaction (the error ends the session). It
// counts the outbox records published.
func (s *Sink) produceTxn(ctx context.Context, batch []decode.Event, tb *txnBatch) error {
	if s.Guard != nil {
		if err := s.Guard(); err != nil {
			return err // the session ends; close aborts the transaction
		}
	}
	if cap(s.outs) < len(tb.recs) {
		s.outs = make([]publish.Outcome, len(tb.recs))
	}
	out := s.outs[:len(tb.recs)]
	defer clear(out)
	start := time.Now()
	err := s.pub.Write(ctx, tb.recs, out)
	end := time.Now()
	s.m.PublishDuration.Observe(end.Sub(start).Seconds())
	if err != nil {
		return err
	}
	failed, err := s.txnRecordsFailed(batch, tb.idx, out)
	if err != nil {
		return err
	}
	hookcall.FromContext(ctx).Written(batch, tb.idx, out, start, end, failed, true)
	if failed != nil {
		return s.abort(ctx, failed)
	}
	s.countPublished(tb.recs, out)
	return nil
}

// hold adds batch's events to what the open transaction holds, to be
// acknowledged at its commit.
func (e *eosState) hold(batch []decode.Event) {
	for i := range batch {
		ev := &batch[i]
		if ev.Marker {
			continue
		}
		if len(e.redo) > 0 {
			delete(e.redo, ev.Record.Pos) // written at last
		}
		if n := len(e.acks); n > 0 && e.acks[n-1].tx == ev.Tx {
			e.acks[n-1].n++
		} else {
			e.acks = append(e.acks, pendingAck{tx: ev.Tx, n: 1, commit: ev.Commit})
		}
	}
}

// held is the number of outbox records the open transaction holds.
func (e *eosState) held() int {
	n := 0
	for _, a := range e.acks {
		n += a.n
	}
	return n
}

// commitTxn commits the open transaction with progress, guarded, once the
// state row records the position it names.
func (s *Sink) commitTxn(ctx context.Context, progress []byte) error {
	e := s.eos
	if s.Guard != nil {
		if err := s.Guard(); err != nil {
			return err
		}
	}
	if err := s.recordProgress(ctx); err != nil {
		return s.abort(ctx, err)
	}
	start := time.Now()
	err := s.txn().Commit(ctx, progress)
	e.open = false
	if h := hookcall.FromContext(ctx); h != nil {
		h.TxnCommitted(relayhook.TxnCommitted{Records: e.held(), Began: e.began, Start: start, End: time.Now(), ProgressLSN: e.lastEnd, Err: err})
	}
	if err != nil {
		e.acks = e.acks[:0]
		return s.txnError("commit", err)
	}
	s.m.ProgressLSN.Set(float64(e.lastEnd))
	return nil
}

// recordProgress waits, at most half the transaction timeout, until the
// state row records the progress the open transaction is to commit (see
// Recorded).
func (s *Sink) recordProgress(ctx context.Context) error {
	if s.Recorded == nil {
		return nil
	}
	pos := max(pglogrepl.LSN(s.eos.lastEnd), s.eos.part.Final)
	if d := s.cfg.TransactionTimeout / 2; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	if err := s.Recorded(ctx, pos); err != nil {
		return fmt.Errorf("relay: exactly-once: the state row does not record the progress %s: %w", pos, err)
	}
	return nil
}

// txnRecordsFailed judges the outcomes out of a transactional write of
// batch (idx maps each record to its batch index). It returns the first
// record error (the transaction is then aborted), having remembered each
// record the broker refused for its own sake, or an error that ends the
// session at once.
func (s *Sink) txnRecordsFailed(batch []decode.Event, idx []int, out []publish.Outcome) (failed, err error) {
	for n, o := range out {
		if o.Verdict == publish.Confirmed {
			continue
		}
		if failed == nil {
			failed = o.Err
			s.m.PublishErrors.Inc()
		}
		ev := &batch[idx[n]]
		switch o.Verdict {
		case publish.Fenced:
			return nil, s.txnError("produce", fmt.Errorf("%w: %w", publish.ErrFenced, o.Err))
		case publish.Fatal:
			return nil, relayerr.Permanent(fmt.Errorf("%w: %w", relaytype.ErrKafkaAuth, o.Err))
		case publish.TopicUnavailable:
			expired, err := s.topicUnavailable(ev, o)
			if err != nil {
				return nil, err
			}
			if expired {
				s.eos.refuse(ev, o, true)
			}
		case publish.Refused, publish.RefusedUnlessTransient:
			s.eos.refuse(ev, o, o.Verdict == publish.Refused)
		}
	}
	return failed, nil
}

// abort aborts the open transaction after cause and returns the error that
// ends the session.
func (s *Sink) abort(ctx context.Context, cause error) error {
	s.eos.open, s.eos.acks = false, s.eos.acks[:0]
	if err := s.txn().Abort(ctx); err != nil && errors.Is(err, publish.ErrFenced) {
		return s.txnError("abort", err)
	}
	s.cfg.Logger.Warn("exactly-once: kafka transaction aborted; resuming from the committed progress", "error", cause)
	return fmt.Errorf("%w: %w", errTxnAborted, cause)
}

// acknowledgeTxn acknowledges what the committed transaction held.
func (s *Sink) acknowledgeTxn(tr *acktrack.Tracker) {
	now := time.Now()
	for _, a := range s.eos.acks {
		s.m.CommitToAck.Observe(now.Sub(a.commit).Seconds())
		tr.Ack(a.tx, a.n)
	}
	s.eos.acks = s.eos.acks[:0]
	s.m.InFlight.Set(float64(tr.InFlight()))
}
