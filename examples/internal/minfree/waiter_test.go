package minfree

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A Waiter explains its first wait once, asks for room after each wait,
// prints a failing MakeRoom's error once while it stays the same, and
// stops waiting, without asking for room, once its context ends.
func TestWaiter(t *testing.T) {
	var out strings.Builder
	rooms := 0
	roomErr := errors.New("checkpoint: no room")
	w := &Waiter{Out: &out, Prefix: "x: ", Hint: "lower -min-free", MakeRoom: func() error { rooms++; return roomErr }}
	refused := errors.New("insufficient disk space")
	for range 3 {
		w.Wait(context.Background(), refused)
	}
	if w.Count() != 3 || rooms != 3 || w.Waited() < 3*RetryDelay {
		t.Errorf("after 3 waits: Count %d, MakeRoom called %d times, Waited %v", w.Count(), rooms, w.Waited())
	}
	want := "x: the source waits for disk space while takes go on, retrying every 500ms after a checkpoint: insufficient disk space\n" +
		"x: lower -min-free\n" +
		"x: a checkpoint to make room failed (the source waits on): checkpoint: no room\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	w.Wait(ctx, refused)
	if d := time.Since(start); d >= RetryDelay || rooms != 3 {
		t.Errorf("a wait with its context done took %v and called MakeRoom %d times in all, want 3", d, rooms)
	}
}
