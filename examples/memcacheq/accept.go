package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"
)

// Accepting connections. Two things must not stop the server: an accept
// that fails for a reason that passes (out of descriptors, a connection
// reset before it was accepted), and more clients than it should serve.
//
//   - A failed accept whose error is retryableAccept is retried after a
//     pause that starts at acceptBackoffMin and doubles up to
//     acceptBackoffMax (net/http's Server does the same), so that a
//     server out of descriptors neither spins nor exits. Each is counted
//     (STAT accept_errors); the first of a run is logged, then one line a
//     minute while the run lasts, and one when accepts work again.
//   - A connection beyond -max-conns is accepted, sent
//     tooManyConnsReply and closed at once, in the accept loop: no
//     goroutine and no buffers. It is counted (STAT
//     rejected_connections) and logged at most once a minute.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
	// refuseWriteTimeout bounds the write of tooManyConnsReply, which
	// goes to the empty send buffer of a new connection and so does not
	// wait in practice.
	refuseWriteTimeout = 100 * time.Millisecond
	// tooManyConnsReply is sent to a connection beyond -max-conns before
	// it is closed. A client reads it as the reply to its first command;
	// one that had already sent that command may see the connection reset
	// instead (closing a socket with unread input resets it). Either way
	// the command fails at once.
	tooManyConnsReply = "SERVER_ERROR too many connections\r\n"
)

// retryableErrnos are the accept errors that a later accept may not have:
// out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM), a
// connection that failed between its handshake and the accept (accept(2)
// on Linux passes on its network error: ECONNABORTED, EPROTO, ENETDOWN,
// ...), a firewall rule (EPERM), an interrupted call.
var retryableErrnos = []syscall.Errno{
	syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
	syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EPROTO, syscall.EPERM,
	syscall.ENETDOWN, syscall.ENETUNREACH, syscall.EHOSTDOWN, syscall.EHOSTUNREACH,
	syscall.ENOPROTOOPT, syscall.EOPNOTSUPP, syscall.ETIMEDOUT,
	syscall.EAGAIN, syscall.EINTR,
}

// retryableAccept reports whether serve should retry after Accept
// returned err rather than stop serving.
func retryableAccept(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, errno := range retryableErrnos {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// serve accepts connections until shutdown closes the listener. An accept
// error that is not retryableAccept (the listener closed by someone else,
// say) ends it with that error.
func (s *server) serve(ln net.Listener) error {
	var delay time.Duration // the pause before the next retry; 0 while accepts work
	var failed int64        // accepts failed in a row
	var acceptLog throttledLog
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return nil
			}
			if !retryableAccept(err) {
				return fmt.Errorf("accept: %w", err)
			}
			s.acceptErrors.Add(1)
			failed++
			delay = min(max(2*delay, acceptBackoffMin), acceptBackoffMax)
			acceptLog.warn(s.log, "accept failed; retrying", "err", err, "failed_in_a_row", failed, "retry_in", delay)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-s.stopped:
				t.Stop()
				return nil
			}
			continue
		}
		if failed > 0 {
			s.log.Warn("accepting connections again", "failed_accepts", failed)
			failed, delay = 0, 0
			acceptLog.reset()
		}
		if !s.admit(nc) {
			return nil
		}
	}
}

// admit starts serving nc, or refuses it when -max-conns are open; false
// means the server is shutting down (nc is closed).
func (s *server) admit(nc net.Conn) bool {
	c := &conn{Conn: nc, reads: map[string]*openRead{}}
	s.connsMu.Lock()
	if s.closing.Load() {
		s.connsMu.Unlock()
		nc.Close()
		return false
	}
	if len(s.open) >= s.o.maxConns {
		s.connsMu.Unlock()
		s.refuse(nc)
		return true
	}
	s.open[c] = struct{}{}
	s.conns.Add(1)
	s.currConns.Add(1)
	s.totalConns.Add(1)
	s.connsMu.Unlock()
	go s.handle(c)
	return true
}

// refuse sends tooManyConnsReply to a connection beyond -max-conns and
// closes it.
func (s *server) refuse(nc net.Conn) {
	n := s.rejectedConns.Add(1)
	s.rejectLog.warn(s.log, "refused a connection: too many connections", "max_conns", s.o.maxConns,
		"remote", nc.RemoteAddr().String(), "rejected_connections", n)
	nc.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
	io.WriteString(nc, tooManyConnsReply)
	nc.Close()
}

// throttledLog logs a warning at most once per throttledLogEvery, so that
// a condition a client can cause at will (or one that lasts) cannot flood
// the log; the counters in stats have the full count. Its zero value is
// ready to use.
type throttledLog struct {
	// mu guards last.
	mu   sync.Mutex
	last time.Time
}

const throttledLogEvery = time.Minute

// reset makes the next warn log at once.
func (l *throttledLog) reset() {
	l.mu.Lock()
	l.last = time.Time{}
	l.mu.Unlock()
}

func (l *throttledLog) warn(log *slog.Logger, msg string, args ...any) {
	l.mu.Lock()
	now := time.Now()
	due := l.last.IsZero() || now.Sub(l.last) >= throttledLogEvery
	if due {
		l.last = now
	}
	l.mu.Unlock()
	if due {
		log.Warn(msg, args...)
	}
}
