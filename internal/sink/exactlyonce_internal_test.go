package sink

import (
	"cmp"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
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
	rec := s.progressRecord(0x500, commit, decode.Position{Final: 0x600, Seq: 3})
	if len(rec.Headers) != 1 || rec.Headers[0].Key != contract.HeaderProgress || string(rec.Key) != "pgoutbox-relay/7/s/i1" {
		t.Fatalf("progress record %+v", rec)
	}
	var p progress
	if err := json.Unmarshal(rec.Value, &p); err != nil {
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
		{"its own", nil, h, 0x1000, Progress{EndLSN: 0x500, Part: decode.Position{Final: 0x600, Seq: 3}, CommitTime: commit}, "", 0},
		{"another system", nil, History{SystemID: "8", Timeline: 2, SlotCreatedLSN: 0x100, Incarnation: "i1"}, 0x1000, Progress{}, "other-history", 0},
		{"another timeline", nil, History{SystemID: "7", Timeline: 3, SlotCreatedLSN: 0x100, Incarnation: "i1"}, 0x1000, Progress{}, "other-history", 0},
		{"a re-created slot", nil, History{SystemID: "7", Timeline: 2, SlotCreatedLSN: 0x200, Incarnation: "i1"}, 0x1000, Progress{}, "other-history", 0},
		{"another incarnation", nil, History{SystemID: "7", Timeline: 2, SlotCreatedLSN: 0x100, Incarnation: "i2"}, 0x1000, Progress{}, "other-history", 0},
		{"past the WAL", nil, h, 0x550, Progress{}, "beyond-wal", 0},
		{"a part past the WAL", nil, h, 0x5f0, Progress{}, "beyond-wal", 0},
		{"unparsable", func(p *progress) { p.EndLSN = "x" }, h, 0x1000, Progress{}, "unreadable", 0},
		{"none", func(p *progress) { *p = progress{} }, h, 0x1000, Progress{}, "", 0},
		{"within the state row", nil, h, 0x1000, Progress{EndLSN: 0x500, Part: decode.Position{Final: 0x600, Seq: 3}, CommitTime: commit}, "", 0x600},
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
