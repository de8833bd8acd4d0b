package sink

import (
	"cmp"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/publish/kafkapub"
	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
)

// A progress record the sink writes is trusted back for its own history
// (its part too); one of another system, timeline, slot creation or
// incarnation, one
// past the server's WAL, one past the state row's ceiling and one that
// does not parse are not, each counted under its reason.
func TestTrustProgress(t *testing.T) {
	t.Parallel()
	h := History{SystemID: "7", Timeline: 2, SlotCreatedLSN: 0x100, Incarnation: "i1"}
	s := &Sink{cfg: testConfig(nil), eos: &eosState{key: ProgressKey(h.SystemID, "s", h.Incarnation), history: h}}
	commit := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	v := s.progressValue(0x500, commit, publish.Position{Final: 0x600, Seq: 3})
	if s.eos.key != "pgoutbox-relay/7/s/i1" {
		t.Fatalf("progress key %s", s.eos.key)
	}
	var p progress
	if err := json.Unmarshal(v, &p); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		edit   func(p *progress)
		h      History
		walEnd uint64
		want   Progress
		reason string
		// recorded is the state row's ceiling; 0: walEnd.
		recorded uint64
	}{
		{"its own", nil, h, 0x1000, Progress{EndLSN: 0x500, Part: publish.Position{Final: 0x600, Seq: 3}, CommitTime: commit}, "", 0},
		{"another system", nil, History{SystemID: "8", Timeline: 2, SlotCreatedLSN: 0x100, Incarnation: "i1"}, 0x1000, Progress{}, "other-history", 0},
		{"another timeline", nil, History{SystemID: "7", Timeline: 3, SlotCreatedLSN: 0x100, Incarnation: "i1"}, 0x1000, Progress{}, "other-history", 0},
		{"a re-created slot", nil, History{SystemID: "7", Timeline: 2, SlotCreatedLSN: 0x200, Incarnation: "i1"}, 0x1000, Progress{}, "other-history", 0},
		{"another incarnation", nil, History{SystemID: "7", Timeline: 2, SlotCreatedLSN: 0x100, Incarnation: "i2"}, 0x1000, Progress{}, "other-history", 0},
		{"past the WAL", nil, h, 0x550, Progress{}, "beyond-wal", 0},
		{"a part past the WAL", nil, h, 0x5f0, Progress{}, "beyond-wal", 0},
		{"unparsable", func(p *progress) { p.EndLSN = "x" }, h, 0x1000, Progress{}, "unreadable", 0},
		{"none", func(p *progress) { *p = progress{} }, h, 0x1000, Progress{}, "", 0},
		{"within the state row", nil, h, 0x1000, Progress{EndLSN: 0x500, Part: publish.Position{Final: 0x600, Seq: 3}, CommitTime: commit}, "", 0x600},
		{"past the state row", nil, h, 0x1000, Progress{}, "beyond-state", 0x4ff},
		{"a part past the state row", nil, h, 0x1000, Progress{}, "beyond-state", 0x5ff},
	} {
		m := relaymetrics.NewMetrics("s", &pgconnect.Live{})
		q := p
		if tc.edit != nil {
			tc.edit(&q)
		}
		recorded := cmp.Or(tc.recorded, tc.walEnd)
		got, reason := trustProgress(&s.cfg, m.ProgressIgnored, q, tc.h, pglogrepl.LSN(tc.walEnd), pglogrepl.LSN(recorded))
		if got != tc.want || reason != tc.reason {
			t.Errorf("%s: %+v (%q), want %+v (%q)", tc.name, got, reason, tc.want, tc.reason)
		}
		if tc.reason != "" && testutil.ToFloat64(m.ProgressIgnored.WithLabelValues(tc.reason)) != 1 {
			t.Errorf("%s: not counted as %s", tc.name, tc.reason)
		}
	}
}

// A session reads the progress its slot's last session committed although
// a relay of another slot, dead inside a commit, left a transaction open
// on the progress topic before it. The topic is shared by every slot, and
// a read_committed read stops at the oldest open transaction: the session
// resumed from older progress and published again what Kafka held (1,286
// duplicates for a read_committed reader in a busy run of the suite).
func TestOpenExactlyOnceReadsPastAnotherSlotsOpenTransaction(t *testing.T) {
	t.Parallel()
	st := newSinkTest(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := History{SystemID: "7", Timeline: 1, SlotCreatedLSN: 1, Incarnation: "i1"}
	if _, err := st.OpenExactlyOnce(ctx, h, 1<<40, 1<<40); err != nil { // creates the progress topic
		t.Fatal(err)
	}
	pc := st.cfg.Settings.(kafkapub.Config).Producer
	pc.TransactionalID = ProgressKey(h.SystemID, "other", h.Incarnation)
	other, err := producer.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	if err := other.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.Begin(); err != nil {
		t.Fatal(err)
	}
	if errs, err := other.Produce(ctx, []*kgo.Record{{Topic: st.cfg.ProgressTopic, Key: []byte(ProgressKey(h.SystemID, "other", h.Incarnation)), Value: []byte(`{}`)}}); err != nil || errs[0] != nil {
		t.Fatalf("the other slot's write: %v %v", err, errs)
	}
	st.tx(t, st.k.Topic("eos"), 2, 100, true)
	st.run(t)

	next := NewSink(st.cfg, relaymetrics.NewMetrics(st.cfg.Slot, &pgconnect.Live{}))
	t.Cleanup(next.Close)
	got, err := next.OpenExactlyOnce(ctx, h, 1<<40, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	if got.EndLSN != 100 {
		t.Fatalf("the next session's progress ends at %s, want %s (the last commit)", got.EndLSN, pglogrepl.LSN(100))
	}
}
