package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flumego/filechannel/channel"
)

// Reads: what a get does with each key it names, Kestrel's way (the
// package doc's "Reliable reads" and "Groups" say it for users). A key is
// <queue>[+<group>][/<option>]...: a group is a consumer group of the
// queue's channel, created by the first get that names it; /open keeps
// the item's take transaction open on the connection (conn.reads) until
// /close commits it, or /abort or the connection's end rolls it back;
// /peek takes and rolls back at once; t=<ms> waits on the group (or for
// the queue's creation). Every use of a queue's channel holds queue.mu
// shared, so that a removal sees it empty and keeps it so.

// readKey is one key of a get, parsed.
type readKey struct {
	raw   string // as the client sent it
	queue string
	group string        // "" reads the queue itself (its unnamed group)
	wait  time.Duration // t=<ms>

	open, close, abort, peek bool // the options of those names
}

// target names what the key reads: the queue, or <queue>+<group>.
func (k readKey) target() string {
	if k.group == "" {
		return k.queue
	}
	return k.queue + "+" + k.group
}

// fetches reports whether reading k returns an item (or a miss): every
// key but /abort and a /close without /open.
func (k readKey) fetches() bool { return !k.abort && (!k.close || k.open) }

// maxWaitMillis is the largest t=<ms>, Kestrel's (a 32-bit int).
const maxWaitMillis = 1<<31 - 1

func parseReadKey(b []byte) (readKey, error) {
	k := readKey{raw: string(b)}
	name, opts, _ := strings.Cut(k.raw, "/")
	queue, group, fanout := strings.Cut(name, "+")
	if !validName([]byte(queue)) {
		return k, clientError(badName(b))
	}
	if fanout && !validGroupName(group) {
		// The group alone: with the whole key quoted too, escaped bytes
		// could make the reply line too long (FuzzParseCommand).
		return k, clientError("bad group name " + printable([]byte(group)) + ": want 1 to 64 of a-z 0-9 _ . -")
	}
	k.queue, k.group = queue, group
	if len(name) == len(k.raw) {
		return k, nil
	}
	for _, opt := range strings.Split(opts, "/") {
		switch {
		case opt == "open":
			k.open = true
		case opt == "close":
			k.close = true
		case opt == "abort":
			k.abort = true
		case opt == "peek":
			k.peek = true
		case strings.HasPrefix(opt, "t="):
			ms, err := strconv.ParseUint(opt[2:], 10, 31)
			if err != nil {
				return k, clientError(fmt.Sprintf("bad option %s in %s: want t=<milliseconds> up to %d", printable([]byte(opt)), printable(b), maxWaitMillis))
			}
			k.wait = time.Duration(ms) * time.Millisecond
		default:
			return k, clientError("unknown option " + printable([]byte(opt)) + " in " + printable(b) + ": want open, close, abort, peek or t=<ms>")
		}
	}
	if (k.peek || k.abort) && (k.open || k.close) || k.peek && k.abort {
		return k, clientError("options of " + printable(b) + " do not go together: peek and abort go with neither open nor close, nor with each other")
	}
	return k, nil
}

// validGroupName reports whether s is a consumer group's name: 1 to 64 of
// [a-z0-9._-] (channel.GroupConfig's rule).
func validGroupName(s string) bool {
	if len(s) == 0 || len(s) > maxNameLen {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}

// openRead is an item a connection took with /open and has neither
// closed nor aborted: its take transaction, used only by the connection's
// goroutine.
type openRead struct {
	q  *queue
	tx *channel.Transaction
}

// checkReads refuses a get whose keys would take from a queue (or group)
// that the connection has an item open on by then: get q, or get q/open
// without close. It runs before any key is read, so that a refused get
// has taken nothing.
func (c *conn) checkReads(keys []readKey) error {
	opened := map[string]bool{} // as the keys before this one leave it
	isOpen := func(t string) bool {
		if v, ok := opened[t]; ok {
			return v
		}
		return c.reads[t] != nil
	}
	for _, k := range keys {
		t := k.target()
		if k.abort || k.close {
			opened[t] = false
		}
		if !k.fetches() {
			continue
		}
		if !k.peek && isOpen(t) {
			return clientError(fmt.Sprintf("%s has an item open on this connection: close it first (get %s/close, or %s/close/open for the next); closing the connection, which gives the item back",
				t, t, t))
		}
		if k.open {
			opened[t] = true
		}
	}
	return nil
}

// get reads each key in turn and writes a VALUE for each item. A refusal
// by checkReads closes the connection (Kestrel's rule); a read that fails
// ends the reply there: its error if no VALUE was written yet, else END
// after the values read so far.
func (s *server) get(c *conn, w *bufio.Writer, cmd command) (quit bool) {
	if err := c.checkReads(cmd.reads); err != nil {
		w.WriteString(err.Error() + "\r\n")
		s.log.Info("closed a connection that read a queue it holds an open item of", "remote", c.RemoteAddr().String(), "err", err)
		return true
	}
	values := 0
	for i, k := range cmd.reads {
		ev, ok, err := s.read(c, k)
		if err != nil {
			msg := s.getError(k, err)
			if values == 0 {
				w.WriteString(msg)
				return false
			}
			break
		}
		if !ok {
			continue
		}
		values++
		flags := ev.Headers["flags"]
		if flags == "" {
			flags = "0"
		}
		fmt.Fprintf(w, "VALUE %s %s %d", cmd.keys[i], flags, len(ev.Body))
		if cmd.name == "gets" {
			w.WriteString(" 0") // a cas unique, which the cas command (refused) would use
		}
		w.Write(crlf)
		w.Write(ev.Body)
		w.Write(crlf)
	}
	w.WriteString("END\r\n")
	return false
}

// getError logs err and returns the reply line for it.
func (s *server) getError(k readKey, err error) string {
	if errors.Is(err, errTooManyGroups) {
		s.refuseLog.warn(s.log, "refused a get: too many groups", "queue", k.queue, "group", k.group, "max_groups", s.o.maxGroups)
		return "CLIENT_ERROR " + err.Error() + "\r\n"
	}
	return s.serverError("get", k.target(), err)
}

// read does what key k says: closes or aborts the connection's open item,
// then takes, opens or peeks at an item.
func (s *server) read(c *conn, k readKey) (ev channel.Event, ok bool, err error) {
	if k.abort {
		s.abortRead(c, k.target())
		return channel.Event{}, false, nil
	}
	if k.close {
		if err := s.closeRead(c, k.target()); err != nil {
			return channel.Event{}, false, err
		}
	}
	if !k.fetches() {
		return channel.Event{}, false, nil
	}
	s.cmdGet.Add(1)
	ev, ok, err = s.fetch(c, k)
	if err == nil {
		if ok {
			s.getHits.Add(1)
		} else {
			s.getMiss.Add(1)
		}
	}
	return ev, ok, err
}

// fetch takes (or opens, or peeks at) the item at the head of k's queue
// or group, waiting up to k.wait for one. A get never creates a queue; it
// creates the group it names.
func (s *server) fetch(c *conn, k readKey) (channel.Event, bool, error) {
	var deadline time.Time
	if wait := k.wait; wait > 0 {
		if s.o.idleTimeout > 0 {
			wait = min(wait, s.o.idleTimeout)
		}
		deadline = time.Now().Add(wait)
		defer s.extendWrite(c) // the reply's time starts after the wait
	}
	for {
		created := s.qs.createdSignal() // before the look-up, so that no creation is missed
		q, _, err := s.qs.use(k.queue, false)
		if err != nil {
			return channel.Event{}, false, err
		}
		var g *channel.Group
		if q != nil {
			g, err = q.group(k.group, true, s.o.maxGroups, s.log)
			if err == nil {
				var ev channel.Event
				var ok bool
				ev, ok, err = s.takeFrom(c, q, g, k)
				if err == nil && ok {
					q.mu.RUnlock()
					return ev, true, nil
				}
			}
			q.mu.RUnlock()
			if err != nil {
				return channel.Event{}, false, err
			}
		}
		if deadline.IsZero() || !time.Now().Before(deadline) {
			return channel.Event{}, false, nil
		}
		ctx, cancel := context.WithDeadline(s.ctx, deadline)
		if g != nil {
			g.Wait(ctx) // an error (closed, removed) is seen by the next look-up
		} else {
			select {
			case <-created:
			case <-ctx.Done():
			}
		}
		cancel()
		if s.ctx.Err() != nil {
			return channel.Event{}, false, nil // shutting down: a miss
		}
	}
}

// takeFrom takes the head item of group g of q, whose mu the caller holds
// shared, and commits the take (a plain get), rolls it back (peek) or
// keeps it open on c (open); ok is false when there is none.
func (s *server) takeFrom(c *conn, q *queue, g *channel.Group, k readKey) (channel.Event, bool, error) {
	tx, err := g.Begin()
	if err != nil {
		return channel.Event{}, false, err
	}
	ev, ok, err := tx.Take()
	if err != nil || !ok {
		return channel.Event{}, false, errors.Join(err, tx.Rollback())
	}
	switch {
	case k.peek:
		tx.Rollback() // only fails once the queue is closed: then the item is back at the next start
	case k.open:
		c.reads[k.target()] = &openRead{q: q, tx: tx}
		s.openReads.Add(1)
	default:
		if err := tx.Commit(); err != nil {
			return channel.Event{}, false, err // rolled back: the item stays queued
		}
	}
	return ev, true, nil
}

// closeRead commits c's open item of target, if there is one. A commit
// that fails has rolled back: the item is at the head again.
func (s *server) closeRead(c *conn, target string) error {
	r := c.reads[target]
	if r == nil {
		return nil
	}
	delete(c.reads, target)
	s.openReads.Add(-1)
	if err := r.tx.Commit(); err != nil {
		s.canceledReads.Add(1)
		return fmt.Errorf("close the open item of %s (it is back in the queue): %w", target, err)
	}
	return nil
}

// abortRead rolls c's open item of target back, if there is one.
func (s *server) abortRead(c *conn, target string) {
	r := c.reads[target]
	if r == nil {
		return
	}
	delete(c.reads, target)
	s.openReads.Add(-1)
	s.canceledReads.Add(1)
	r.tx.Rollback() // only fails once the queue is closed: then the item is back at the next start
}

// releaseReads gives back every item c holds open: its connection is
// closing.
func (s *server) releaseReads(c *conn) {
	for target := range c.reads {
		s.log.Info("gave an open item back: its connection closed", "queue", target, "remote", c.RemoteAddr().String())
		s.abortRead(c, target)
	}
}
