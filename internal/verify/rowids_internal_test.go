package verify

import (
	"testing"

	"github.com/google/uuid"
)

// The row-ID filter holds every row, spilled or not, and lets few other IDs
// through; building it leaves the sort whole.
func TestRowIDs(t *testing.T) {
	t.Parallel()
	s := newSorter(compareRows, codec[rowEntry](rowCodec{}), 100, t.TempDir(), &spillBudget{})
	defer s.close()
	const n = 5_000
	rows := map[uuid.UUID]bool{}
	for range n {
		id := uuid.New()
		rows[id] = true
		if err := s.add(rowEntry{id: id, aggregateID: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	if s.spilled == 0 {
		t.Fatal("nothing spilled: the test does not read the runs")
	}
	ids, err := newRowIDs(s, n)
	if err != nil {
		t.Fatal(err)
	}
	for id := range rows {
		if !ids.has(id) {
			t.Fatalf("row %s not in the filter", id)
		}
	}
	through := 0
	for range 100_000 {
		if ids.has(uuid.New()) {
			through++
		}
	}
	if through > 1_000 {
		t.Errorf("%d of 100,000 other IDs pass the filter, want about 100", through)
	}
	if got := len(sortedValues(t, s)); got != n {
		t.Fatalf("the sort yields %d rows after the filter was built, want %d", got, n)
	}
	if empty, err := newRowIDs(newSorter(compareRows, codec[rowEntry](rowCodec{}), 100, t.TempDir(), &spillBudget{}), 0); err != nil || empty.has(uuid.New()) {
		t.Fatalf("no rows: %v, want a filter that holds nothing", err)
	}
}

// A small window's filter lets no other ID through: sized for a handful
// of rows it was a few dozen bits that let about 1 in 370 through, and a
// short window over a busy topic stored records of no row (and spilled).
func TestRowIDsSmallWindow(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 5, 100} {
		s := newSorter(compareRows, codec[rowEntry](rowCodec{}), 1000, t.TempDir(), &spillBudget{})
		for range n {
			if err := s.add(rowEntry{id: uuid.New(), aggregateID: "a"}); err != nil {
				t.Fatal(err)
			}
		}
		ids, err := newRowIDs(s, int64(n))
		if err != nil {
			t.Fatal(err)
		}
		through := 0
		for range 100_000 {
			if ids.has(uuid.New()) {
				through++
			}
		}
		if through > 0 {
			t.Errorf("%d rows: %d of 100,000 other IDs pass the filter, want none", n, through)
		}
		s.close()
	}
}

// sortedValues is every value of s, in order.
func sortedValues[T any](t *testing.T, s *sorter[T]) []T {
	t.Helper()
	m, err := s.sorted()
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	var got []T
	for {
		v, ok, err := m.next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return got
		}
		got = append(got, v)
	}
}
