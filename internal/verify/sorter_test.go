package verify

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// The external sort yields every value in order, whether it fit in memory
// or spilled runs (and merged runs once there were more than maxFanIn),
// and leaves no file behind.
func TestSorter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n, max int
	}{
		{"in memory", 500, 1000},
		{"spilled", 500, 37},
		{"compacted", 5000, 7},
		{"empty", 0, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(1, uint64(tc.n)))
			s := newSorter(compareRecords, codec[recordEntry](recordCodec{}), tc.max, dir, &spillBudget{})
			var want []recordEntry
			for i := range tc.n {
				var id uuid.UUID
				id[0], id[15] = byte(rng.IntN(16)), byte(i)
				e := recordEntry{recordPlace: recordPlace{id: id, topic: uint32(rng.IntN(3)), partition: int32(rng.IntN(4)), offset: rng.Int64N(1e12) - 5e11,
					timestamp: rng.Int64()}, key: strings.Repeat("k", rng.IntN(300)), businessKey: "bk", hasBK: i%2 == 0}
				want = append(want, e)
				if err := s.add(e); err != nil {
					t.Fatal(err)
				}
			}
			got := sortedValues(t, s)
			slices.SortStableFunc(want, func(a, b recordEntry) int { return compareRecords(&a, &b) })
			if len(got) != len(want) {
				t.Fatalf("got %d values, want %d", len(got), len(want))
			}
			for i := range want {
				if compareRecords(&got[i], &want[i]) != 0 || got[i] != want[i] {
					t.Fatalf("value %d: got %+v, want %+v", i, got[i], want[i])
				}
			}
			if spill := tc.n > tc.max; spill != (s.spilled > 0) {
				t.Errorf("spilled %d runs for %d values over %d in memory", s.spilled, tc.n, tc.max)
			}
			s.close()
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("%d files left in the spill directory", len(left))
			}
		})
	}
}

// A run whose spill files would pass their byte cap fails with
// ErrSpillFull, saying what to do, rather than fill the disk.
func TestSorterSpillCap(t *testing.T) {
	t.Parallel()
	s := newSorter(compareRecords, codec[recordEntry](recordCodec{}), 10, t.TempDir(), &spillBudget{max: 4096})
	defer s.close()
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		err = s.add(recordEntry{recordPlace: recordPlace{offset: int64(i)}, key: strings.Repeat("k", 100)})
	}
	if !errors.Is(err, ErrSpillFull) || !strings.Contains(err.Error(), "--max-spill-bytes") {
		t.Fatalf("add: %v, want ErrSpillFull naming --max-spill-bytes", err)
	}
}
