package rabbitmqpub_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/publish/rabbitmqpub"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// read reads dests from since through a publisher that opened no session.
func read(t *testing.T, uri string, dests []string, since time.Time) (publish.Holdings, []string) {
	t.Helper()
	p, err := publish.New(rabbitmqpub.Name, publish.Config{Slot: "slot1", Settings: rabbitmqpub.Config{URI: uri}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	h, err := p.(publish.Reader).Read(t.Context(), dests, since, func(r *publish.Record, at publish.Place) error {
		var id string
		for _, h := range r.Headers {
			if h.Key == "message-id" {
				id = string(h.Value)
			}
		}
		got = append(got, fmt.Sprintf("%s@%d:%s:%s", id, at.Offset, r.Key, r.Value))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return h, got
}

// Read gives every message a stream held when it began, from the given
// commit time on, with its offset, headers, key and body; a stream that
// does not exist is missing, an empty one is read as an empty range, and
// what is written after the read began is not read.
func TestRead(t *testing.T) {
	t.Parallel()
	r, env, name := setup(t)
	empty := name + ".empty"
	testenv.DeclareStream(t, env, empty)
	recs := records(name, 10, 0x1_0000_0000)
	for i, rec := range recs {
		rec.Headers = append(rec.Headers, publish.Header{Key: "aggregate-id", Value: rec.Key})
		rec.Timestamp = time.Now().Add(time.Duration(i-10) * time.Second)
	}
	write(t, open(t, r.StreamURI, "inc1"), recs)
	h, got := read(t, r.StreamURI, []string{name, name + ".missing", empty}, recs[4].Timestamp)
	var want []string
	for i, rec := range recs[4:] {
		want = append(want, fmt.Sprintf("id-%d@%d:%s:%s", i+4, i+4, rec.Key, rec.Value))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("read %v, want %v", got, want)
	}
	if len(h.Missing) != 1 || h.Missing[0] != name+".missing" || len(h.Unreadable) != 0 || len(h.Ranges) != 2 {
		t.Fatalf("holdings %+v", h)
	}
	if pr := h.Ranges[0].Partitions; h.Ranges[0].Topic != name || len(pr) != 1 || pr[0].Start != 0 || pr[0].End != 10 {
		t.Fatalf("range of %s: %+v", name, h.Ranges[0])
	}
	if pr := h.Ranges[1].Partitions; h.Ranges[1].Topic != empty || len(pr) != 1 || pr[0].Start != 0 || pr[0].End != 0 {
		t.Fatalf("range of the empty stream: %+v", h.Ranges[1])
	}
	// Since after every record: nothing.
	if _, got := read(t, r.StreamURI, []string{name}, time.Now().Add(time.Hour)); len(got) != 0 {
		t.Fatalf("read %v from an hour ahead, want nothing", got)
	}
}
