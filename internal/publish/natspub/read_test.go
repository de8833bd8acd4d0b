package natspub_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/publish/natspub"
)

// Read gives a topic's records from since on, each with its bucket and
// stream sequence, up to what the stream held when the read began: a
// record written during the read is not read; a topic no stream captures
// is missing.
func TestRead(t *testing.T) {
	t.Parallel()
	n, _, s := setup(t)
	p := open(t, n.URL)
	allConfirmed(t, write(t, p, records(3, "old")))
	last, err := s.GetMsg(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	since := last.Time.Add(time.Nanosecond) // after the old records, by the stream's clock
	allConfirmed(t, write(t, p, records(4, "new")))
	var got []string
	h, err := p.(publish.Reader).Read(t.Context(), []string{"outbox.payment", "elsewhere.payment"}, since, func(r *publish.Record, at publish.Place) error {
		var id string
		for _, hd := range r.Headers {
			if hd.Key == "message-id" {
				id = string(hd.Value)
			}
		}
		if want := natspub.Subject(r.Topic, r.Key, 4); want != fmt.Sprintf("%s.%d", r.Topic, at.Partition) {
			t.Errorf("%s at bucket %d, want subject %s", id, at.Partition, want)
		}
		if len(got) == 0 { // written during the read: not read
			allConfirmed(t, write(t, p, records(1, "during")))
		}
		got = append(got, id)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[new-0 new-1 new-2 new-3]" || fmt.Sprint(h.Missing) != "[elsewhere.payment]" || len(h.Ranges) != 1 {
		t.Fatalf("read %v, missing %v, ranges %+v; want the 4 new records, elsewhere.payment missing, one topic read", got, h.Missing, h.Ranges)
	}
}
