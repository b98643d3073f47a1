package eventqueue

import (
	"errors"
	"fmt"
	"slices"
)

// maxCheckProblems bounds the problems Check lists one by one; the rest are
// counted.
const maxCheckProblems = 16

// Check verifies the queue against its slots and reports every inconsistency
// (up to a bound, then a count), each wrapping ErrInconsistent: head and size
// in range, no zero pointer inside the ring, reference counts equal to a
// recount, and, while the Remove index exists, that it holds exactly the
// queued pointers at their slots. It is O(size) (O(size log size) with the
// index) and meant for tests and verification tools.
func (q *Queue) Check() error {
	var c checker
	if q.capacity < 1 || q.head < 0 || q.head >= q.capacity || q.size < 0 || q.size > q.capacity {
		c.add("capacity %d, head %d, size %d out of range", q.capacity, q.head, q.size)
		return c.err()
	}
	counts := make(map[uint32]int, len(q.refs))
	for i := 0; i < q.size; i++ {
		phys := q.phys(i)
		p := Pointer(q.slots.Slot(phys))
		if p == 0 {
			c.add("ring position %d (slot %d) holds the zero pointer", i, phys)
			continue
		}
		counts[p.FileID()]++
		if q.idx != nil && !q.idx.has(p, phys) {
			c.add("index misses pointer %v at ring position %d (slot %d)", p, i, phys)
		}
	}
	files := make([]uint32, 0, len(counts)+len(q.refs))
	for f := range counts {
		files = append(files, f)
	}
	for f := range q.refs {
		if _, ok := counts[f]; !ok {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	for _, f := range files {
		if got, want := q.refs[f], counts[f]; got != want {
			c.add("file %d has reference count %d, ring holds %d", f, got, want)
		} else if _, ok := q.refs[f]; ok && got <= 0 {
			c.add("file %d has reference count %d, want it absent", f, got)
		}
	}
	if q.idx != nil && q.idx.len() != q.size {
		c.add("index holds %d entries for %d queued pointers", q.idx.len(), q.size)
	}
	return c.err()
}

// checker collects Check's problems.
type checker struct {
	errs  []error
	extra int
}

func (c *checker) add(format string, args ...any) {
	if len(c.errs) == maxCheckProblems {
		c.extra++
		return
	}
	c.errs = append(c.errs, fmt.Errorf("%w: "+format, append([]any{ErrInconsistent}, args...)...))
}

func (c *checker) err() error {
	if c.extra > 0 {
		c.errs = append(c.errs, fmt.Errorf("%w: %d more problems", ErrInconsistent, c.extra))
	}
	return errors.Join(c.errs...)
}
