package decode

import (
	"math/bits"
	"sync"
)

// How the copies of large rows are recycled. An event keeps one copy of
// its row's values (RowEvent): for rows of 100 KB that copy was most of
// the garbage the relay made, and under the soft memory limit `relay
// run` sets (about its buffer and a quarter again, plus 16 MiB) the
// collector then ran every hundred-odd rows, its marking, sweeping and
// their scheduling costing more CPU than the copy. A copy of at least
// pooledMin bytes comes from a pool of its size class and goes back to it
// once the sink has written the event (Recycle); the pools are
// sync.Pools, so what an idle relay keeps there is freed within two
// collections.
const (
	// pooledMin and pooledMax bound the copies that are pooled: a small
	// row costs the collector little, and a huge one is rare.
	pooledMin = 4 << 10
	pooledMax = 64 << 20
	// classSteps is the number of size classes per power of two: a copy
	// wastes at most 1/classSteps of its size (Go rounds an allocation
	// this large up to whole 8 KiB pages anyway).
	classSteps = 8
)

// rowPools holds the free copies, by size class (sizeClass).
var rowPools [(bits.UintSize + 1) * classSteps]sync.Pool

// sizeClass is the class of a copy of n bytes (pooledMin <= n <=
// pooledMax) and the capacity of the class's buffers: the least of
// 2^(e-1) + k·2^(e-1)/classSteps (k = 1..classSteps) at least n, where
// 2^(e-1) < n <= 2^e.
func sizeClass(n int) (class, size int) {
	e := bits.Len(uint(n - 1))
	base := 1 << (e - 1)
	step := base / classSteps
	k := (n - base + step - 1) / step
	return e*classSteps + k - 1, base + k*step
}

// rowBuffer is an empty buffer of at least n bytes from the pools, or nil
// when a copy of n bytes is not pooled.
func rowBuffer(n int) *[]byte {
	if n < pooledMin || n > pooledMax {
		return nil
	}
	class, size := sizeClass(n)
	if b, ok := rowPools[class].Get().(*[]byte); ok {
		*b = (*b)[:0]
		return b
	}
	b := make([]byte, 0, size)
	return &b
}

// Recycle gives the memory of evs' records back to the decoder's pools:
// their keys, values and header values must not be read afterwards. The
// sink calls it for a batch the publisher wrote (publish.Publisher.Write
// returned nil: it holds nothing of the records any more); an event never
// recycled is left to the collector. Recycle clears what it gave back
// from evs, so calling it again on them does nothing; a copy of an event
// taken before must not be recycled too.
func Recycle(evs []Event) {
	for i := range evs {
		b := evs[i].pooled
		if b == nil {
			continue
		}
		evs[i].pooled = nil
		class, _ := sizeClass(cap(*b))
		rowPools[class].Put(b)
	}
}
