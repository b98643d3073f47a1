// Package syncwriter serialises writes to an io.Writer shared by the
// examples' goroutines (sinks, reporters, loggers), so lines never
// interleave.
package syncwriter

import (
	"io"
	"sync"
)

// Writer is an io.Writer safe for concurrent use.
type Writer struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

// New returns a Writer that writes to w, one Write at a time.
func New(w io.Writer) *Writer { return &Writer{w: w} }

func (sw *Writer) Write(p []byte) (int, error) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.w.Write(p)
}
