package channel

import (
	"iter"

	"github.com/flumego/filechannel/eventqueue"
)

// pointerBlocks is a list of pointers kept in blocks of a fixed size, so
// that it grows without copying what it holds: a reset's new queue takes
// 8 bytes per event, where a slice grown by append briefly holds its old
// and its new array (up to 3 times that). Once full, it can be used as a
// ring (set, rotate): a DropOldest reset keeps the newest events.
type pointerBlocks struct {
	blocks [][]eventqueue.Pointer
	n      int
	start  int // the first pointer's index (rotate)
}

// pointerBlock is the pointers of one block: 512 KiB.
const pointerBlock = 1 << 16

// add appends p.
func (l *pointerBlocks) add(p eventqueue.Pointer) {
	if l.n%pointerBlock == 0 {
		l.blocks = append(l.blocks, make([]eventqueue.Pointer, 0, pointerBlock))
	}
	b := &l.blocks[len(l.blocks)-1]
	*b = append(*b, p)
	l.n++
}

// set replaces the pointer at index i (0 <= i < len, not counting from
// start).
func (l *pointerBlocks) set(i int, p eventqueue.Pointer) {
	l.blocks[i/pointerBlock][i%pointerBlock] = p
}

// rotate makes index i the first: all then yields i, i+1, ... len-1, 0,
// ... i-1.
func (l *pointerBlocks) rotate(i int) { l.start = i }

// len returns the number of pointers.
func (l *pointerBlocks) len() int { return l.n }

// all yields the pointers in order, from start.
func (l *pointerBlocks) all() iter.Seq[eventqueue.Pointer] {
	return func(yield func(eventqueue.Pointer) bool) {
		for k := range l.n {
			i := (l.start + k) % l.n
			if !yield(l.blocks[i/pointerBlock][i%pointerBlock]) {
				return
			}
		}
	}
}
