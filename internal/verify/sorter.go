package verify

import (
	"bufio"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// codec writes and reads one value of T to and from a spill file.
type codec[T any] interface {
	append(dst []byte, v *T) []byte
	read(r *bufio.Reader, v *T) error
}

// maxFanIn is the most runs merged at once; more runs are first merged
// into one, so that a huge window never opens thousands of files.
const maxFanIn = 64

// sorter is an external sort: it keeps at most max values in memory; above
// that it sorts them and writes them to a temporary file (a run), and at
// the end it merges the runs. This is what bounds verify's memory: a
// window of any size needs max values in memory per sorter, plus one
// buffered reader per run while merging.
type sorter[T any] struct {
	cmp   func(a, b *T) int
	codec codec[T]
	max   int
	dir   string
	// disk counts the bytes of the spill files every sorter of a run
	// wrote (runs merged into one count again), up to its cap.
	disk *spillBudget
	buf  []T
	runs []string
	// spilled counts the runs written, merged ones included.
	spilled int
}

func newSorter[T any](cmp func(a, b *T) int, c codec[T], max int, dir string, disk *spillBudget) *sorter[T] {
	return &sorter[T]{cmp: cmp, codec: c, max: max, dir: dir, disk: disk}
}

// ErrSpillFull means the spill files of a run reached Config.MaxSpillBytes.
var ErrSpillFull = errors.New("verify: the spill files reached their byte cap")

// spillBudget bounds the bytes a run writes to its spill files.
type spillBudget struct {
	written, max int64 // max 0: no cap
}

// take counts n more bytes written, failing once over the cap.
func (b *spillBudget) take(n int) error {
	b.written += int64(n)
	if b.max > 0 && b.written > b.max {
		return fmt.Errorf("%w (%d bytes): verify a shorter window, or raise --max-spill-bytes or --max-in-memory", ErrSpillFull, b.max)
	}
	return nil
}

// add adds v, spilling a run when the buffer is full.
func (s *sorter[T]) add(v T) error {
	s.buf = append(s.buf, v)
	if len(s.buf) >= s.max {
		return s.spill()
	}
	return nil
}

// spill sorts the buffer and writes it as a run.
func (s *sorter[T]) spill() error {
	if len(s.buf) == 0 {
		return nil
	}
	slices.SortFunc(s.buf, func(a, b T) int { return s.cmp(&a, &b) })
	path, err := s.writeRun(func(yield func(*T) error) error {
		for i := range s.buf {
			if err := yield(&s.buf[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	clear(s.buf)
	s.buf = s.buf[:0]
	s.runs = append(s.runs, path)
	if len(s.runs) >= maxFanIn {
		return s.compact()
	}
	return nil
}

// writeRun writes the values each yields, in order, to a new run file.
func (s *sorter[T]) writeRun(each func(yield func(*T) error) error) (string, error) {
	f, err := os.CreateTemp(s.dir, "pgoutbox-verify-*.run")
	if err != nil {
		return "", fmt.Errorf("verify: spill to disk: %w", err)
	}
	w := bufio.NewWriterSize(f, 64<<10)
	var scratch []byte
	err = each(func(v *T) error {
		scratch = s.codec.append(scratch[:0], v)
		if err := s.disk.take(len(scratch)); err != nil {
			return err
		}
		_, err := w.Write(scratch)
		return err
	})
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("verify: spill to disk: %w", err)
	}
	s.spilled++
	return f.Name(), nil
}

// compact merges every run into one.
func (s *sorter[T]) compact() error {
	m, err := s.openRuns(s.runs)
	if err != nil {
		return err
	}
	path, err := s.writeRun(func(yield func(*T) error) error {
		for {
			v, ok, err := m.next()
			if err != nil || !ok {
				return err
			}
			if err := yield(&v); err != nil {
				return err
			}
		}
	})
	m.close()
	if err != nil {
		return err
	}
	for _, r := range s.runs {
		_ = os.Remove(r)
	}
	s.runs = append(s.runs[:0], path)
	return nil
}

// sorted returns an iterator over every value added, in order. Once
// anything was spilled, the rest is spilled too, so that the merge holds
// no more than the readers' buffers in memory. The sorter may not be added
// to afterwards.
func (s *sorter[T]) sorted() (*merger[T], error) {
	if len(s.runs) == 0 {
		slices.SortFunc(s.buf, func(a, b T) int { return s.cmp(&a, &b) })
		return &merger[T]{cmp: s.cmp, mem: s.buf}, nil
	}
	if err := s.spill(); err != nil {
		return nil, err
	}
	s.buf = nil
	return s.openRuns(s.runs)
}

// each calls fn for every value added so far, in no particular order,
// without consuming them: the values in memory, then each run file read
// through once.
func (s *sorter[T]) each(fn func(*T)) error {
	for i := range s.buf {
		fn(&s.buf[i])
	}
	for _, p := range s.runs {
		m, err := s.openRuns([]string{p})
		if err != nil {
			return err
		}
		for {
			v, ok, err := m.next()
			if err != nil || !ok {
				m.close()
				if err != nil {
					return err
				}
				break
			}
			fn(&v)
		}
	}
	return nil
}

// close removes the run files.
func (s *sorter[T]) close() {
	for _, r := range s.runs {
		_ = os.Remove(r)
	}
	s.runs, s.buf = nil, nil
}

// openRuns opens a merger over the run files paths.
func (s *sorter[T]) openRuns(paths []string) (*merger[T], error) {
	m := &merger[T]{cmp: s.cmp}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			m.close()
			return nil, fmt.Errorf("verify: read spill file: %w", err)
		}
		r := &run[T]{f: f, r: bufio.NewReaderSize(f, 64<<10), codec: s.codec}
		ok, err := r.advance()
		if err != nil {
			_ = f.Close()
			m.close()
			return nil, err
		}
		if !ok {
			_ = f.Close()
			continue
		}
		m.h.runs = append(m.h.runs, r)
	}
	m.h.cmp = s.cmp
	heap.Init(&m.h)
	return m, nil
}

// run is an open run file and its next value.
type run[T any] struct {
	f     *os.File
	r     *bufio.Reader
	codec codec[T]
	head  T
}

// advance reads the next value into head; false at the end of the file.
func (r *run[T]) advance() (bool, error) {
	var v T
	if err := r.codec.read(r.r, &v); err != nil {
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		return false, fmt.Errorf("verify: read spill file %s: %w", r.f.Name(), err)
	}
	r.head = v
	return true, nil
}

// merger yields values in order: from a sorted slice in memory, or from a
// heap of runs.
type merger[T any] struct {
	cmp func(a, b *T) int
	mem []T
	h   runHeap[T]
}

// next returns the next value; false when there is none.
func (m *merger[T]) next() (T, bool, error) {
	var zero T
	if m.h.runs == nil {
		if len(m.mem) == 0 {
			return zero, false, nil
		}
		v := m.mem[0]
		m.mem[0] = zero
		m.mem = m.mem[1:]
		return v, true, nil
	}
	if len(m.h.runs) == 0 {
		return zero, false, nil
	}
	r := m.h.runs[0]
	v := r.head
	ok, err := r.advance()
	if err != nil {
		return zero, false, err
	}
	if ok {
		heap.Fix(&m.h, 0)
	} else {
		_ = r.f.Close()
		heap.Pop(&m.h)
	}
	return v, true, nil
}

// close closes the open run files (not removing them: the sorter does).
func (m *merger[T]) close() {
	for _, r := range m.h.runs {
		_ = r.f.Close()
	}
	m.h.runs = nil
	m.mem = nil
}

// runHeap orders runs by their head value.
type runHeap[T any] struct {
	runs []*run[T]
	cmp  func(a, b *T) int
}

func (h runHeap[T]) Len() int           { return len(h.runs) }
func (h runHeap[T]) Less(i, j int) bool { return h.cmp(&h.runs[i].head, &h.runs[j].head) < 0 }
func (h runHeap[T]) Swap(i, j int)      { h.runs[i], h.runs[j] = h.runs[j], h.runs[i] }
func (h *runHeap[T]) Push(x any)        { h.runs = append(h.runs, x.(*run[T])) }
func (h *runHeap[T]) Pop() any {
	old := h.runs
	r := old[len(old)-1]
	h.runs = old[:len(old)-1]
	return r
}
