package verify

import (
	"math"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/google/uuid"
)

// Bounds of the row-ID filter.
const (
	// rowIDFalsePositives is the filter's target false-positive rate: the
	// share of records of no row that are stored anyway (and then counted
	// as unmatched by match, as before).
	rowIDFalsePositives = 0.001
	// maxRowIDFilterBytes caps the filter (about 1.8 bytes a row at the
	// target rate: 32 MiB holds 18 million rows; a larger window's filter
	// lets more records of no row through, never drops one of a row).
	maxRowIDFilterBytes = 32 << 20
	// minRowIDFilterRows is the fewest rows the filter is sized for
	// (about 115 KiB). A filter sized for a handful of rows is a few dozen
	// bits, whose rate is well above the target (5 rows: 72 bits, about
	// 0.3%): a short window over a busy topic then stored records of no
	// row by the thousand, and 5 of 400 often enough to spill
	// (TestRecordsOfNoRowAreNotStored, 1 run in 40). Sized for 65,536 rows
	// and holding 5, it lets through about 1 ID in 10^40.
	minRowIDFilterRows = 1 << 16
)

// rowIDs answers whether a message ID may be a row's: never false for a
// row of the window, rarely true for another ID.
type rowIDs struct{ f *bloom.BloomFilter }

// newRowIDs builds the filter of the rows in s (n of them), reading them
// without consuming the sort.
func newRowIDs(s *sorter[rowEntry], n int64) (*rowIDs, error) {
	m, k := bloom.EstimateParameters(uint(max(n, minRowIDFilterRows)), rowIDFalsePositives)
	if m > maxRowIDFilterBytes*8 {
		m = maxRowIDFilterBytes * 8
		k = uint(max(1, math.Round(float64(m)/float64(n)*math.Ln2)))
	}
	ids := &rowIDs{f: bloom.New(m, k)}
	err := s.each(func(r *rowEntry) { ids.f.Add(r.id[:]) })
	return ids, err
}

// has reports whether id may be a row's.
func (r *rowIDs) has(id uuid.UUID) bool { return r.f.Test(id[:]) }

// bytes is the filter's size in memory.
func (r *rowIDs) bytes() int { return int(r.f.Cap() / 8) }
