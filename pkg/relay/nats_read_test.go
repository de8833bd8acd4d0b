package relay_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// natsSinkRows runs the relay while sinkRows commits, until the stream s
// holds as many messages of outbox.order as rows, and returns the rows'
// IDs.
func natsSinkRows(t *testing.T, b *bundle, s jetstream.Stream) []string {
	t.Helper()
	run := b.start(t)
	ids := sinkRows(t, b)
	testenv.WaitFor(t, 60*time.Second, "every row in the stream", func() (bool, error) {
		got, _ := natsIDs(t, s, "outbox.order.")
		return len(got) >= len(ids), nil
	})
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return ids
}

// relay verify over a NATS sink reads the stream: after a drain every row
// is found; the messages deleted from the stream and the rows committed
// while no relay ran are reported missing, by ID, and nothing else is.
func TestNATSSinkVerify(t *testing.T) {
	t.Parallel()
	_, s, b := natsSinkSetup(t, nil)
	from := time.Now().Add(-time.Second)
	ids := natsSinkRows(t, b, s)
	rep := verifyWindow(t, b, from, relaytype.VerifyOptions{})
	if rep.Rows != int64(len(ids)) || rep.Found != int64(len(ids)) || rep.Missing != 0 || rep.Duplicates != 0 ||
		rep.Mismatched != 0 || rep.OrderBreaks != 0 || rep.MissingTopicCount != 0 || !rep.OK() {
		t.Fatalf("after a drain: %+v", rep)
	}

	_, msgs := natsIDs(t, s, "outbox.order.")
	var want []string
	for _, m := range msgs[:3] {
		if err := s.DeleteMsg(t.Context(), m.Sequence); err != nil {
			t.Fatal(err)
		}
		want = append(want, m.Header.Get("message-id"))
	}
	want = append(want, b.insert(t, msg("a", 100), msg("b", 101))...) // no relay runs
	rep = verifyWindow(t, b, from, relaytype.VerifyOptions{})
	var got []string
	for _, r := range rep.MissingRows {
		got = append(got, r.ID)
	}
	slices.Sort(got)
	slices.Sort(want)
	if rep.Missing != int64(len(want)) || strings.Join(got, " ") != strings.Join(want, " ") ||
		rep.Found != int64(len(ids)-3) || rep.OK() {
		t.Fatalf("missing %d %v, found %d; want %d %v and %d: %+v", rep.Missing, got, rep.Found, len(want), want, len(ids)-3, rep)
	}
}

// relay verify names a topic whose subjects no stream captures as a
// missing topic, and its rows missing.
func TestNATSSinkVerifyMissingStream(t *testing.T) {
	t.Parallel()
	_, _, b := natsSinkSetup(t, func(c *relay.Config) { c.TopicTemplate = "elsewhere.{aggregate_type}" })
	from := time.Now().Add(-time.Second)
	b.insert(t, msg("a", 0))
	rep := verifyWindow(t, b, from, relaytype.VerifyOptions{})
	if rep.Missing != 1 || rep.MissingTopicCount != 1 || len(rep.MissingTopics) != 1 || rep.MissingTopics[0] != "elsewhere.order" {
		t.Fatalf("missing %d, missing topics %v (%d); want 1 and [elsewhere.order]", rep.Missing, rep.MissingTopics, rep.MissingTopicCount)
	}
}

// A recovery over a NATS sink publishes only the rows the stream lacks:
// the rows published before the gap are counted as held and not sent
// again, the rows of the gap are sent once.
func TestNATSSinkRecoverPublishesOnlyWhatTheStreamLacks(t *testing.T) {
	t.Parallel()
	_, s, b := natsSinkSetup(t, func(c *relay.Config) { c.BackfillMargin = time.Hour })
	run := b.start(t)
	before := b.insert(t, msg("b", 0), msg("b", 1), msg("b", 2), msg("b", 3), msg("b", 4))
	testenv.WaitFor(t, 60*time.Second, "the rows in the stream", func() (bool, error) {
		got, _ := natsIDs(t, s, "outbox.order.")
		return len(got) >= len(before), nil
	})
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	b.dropSlot(t)
	during := b.insert(t, msg("d", 0), msg("d", 1), msg("d", 2))
	res, err := relay.Recover(context.Background(), b.cfg)
	if err != nil || res.Gap == nil {
		t.Fatalf("Recover: %+v, %v", res, err)
	}
	if res.Published != len(during) || res.AlreadyHeld != len(before) {
		t.Fatalf("Recover published %d rows, %d held already; want %d and %d", res.Published, res.AlreadyHeld, len(during), len(before))
	}
	got, _ := natsIDs(t, s, "outbox.order.")
	if want := append(before, during...); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("stream holds %v, want %v once each", got, want)
	}
}
