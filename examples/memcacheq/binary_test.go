package main

import (
	"encoding/binary"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
)

// binaryRequest returns a binary-protocol request: the 24-byte header and
// then extras, key and value, as a binary client sends it.
func binaryRequest(opcode byte, opaque uint32, extras, key, value string) string {
	h := make([]byte, binaryHeaderLen)
	h[0] = binaryReqMagic
	h[1] = opcode
	binary.BigEndian.PutUint16(h[2:], uint16(len(key)))
	h[4] = byte(len(extras))
	binary.BigEndian.PutUint32(h[8:], uint32(len(extras)+len(key)+len(value)))
	binary.BigEndian.PutUint32(h[12:], opaque)
	return string(h) + extras + key + value
}

// A binary request gets a binary error response at once, and the
// connection is closed, wherever the request comes in a connection and
// however much of it arrives; the server logs the first only.
func TestBinaryRequestIsRefused(t *testing.T) {
	const (
		opGet     = 0x00
		opSet     = 0x01
		opVersion = 0x0b
	)
	tests := []struct {
		name   string
		before string // text commands first, with their replies
		reply  string
		send   string
		opcode byte
		opaque uint32
	}{
		// The bytes memcstat -b sends first.
		{name: "version", send: binaryRequest(opVersion, 0x00010000, "", "", ""), opcode: opVersion, opaque: 0x00010000},
		{name: "get", send: binaryRequest(opGet, 0xdeadbeef, "", "jobs", ""), opcode: opGet, opaque: 0xdeadbeef},
		{name: "set_with_body", send: binaryRequest(opSet, 7, "\x00\x00\x00\x00\x00\x00\x00\x00", "jobs", strings.Repeat("v", 100_000)), opcode: opSet, opaque: 7},
		{name: "after_text_commands", before: "set q 0 0 1\r\nx\r\nversion\r\n", reply: "STORED\r\nVERSION " + version + "\r\n",
			send: binaryRequest(opGet, 42, "", "q", ""), opcode: opGet, opaque: 42},
		{name: "short_header", send: "\x80\x0b\x00", opcode: opVersion},
		{name: "magic_alone", send: "\x80", opcode: 0},
	}
	// An hour of idle timeout: a close that comes now is the refusal's.
	s := startServer(t, options{dir: t.TempDir(), idleTimeout: time.Hour})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, s.addr)
			if tt.before != "" {
				c.exchange("text commands", tt.before, tt.reply)
			}
			start := time.Now()
			// Far below the 5-minute idle timeout the refusal replaces,
			// and far above what a loaded machine needs: a close that does
			// not come fails the reads below.
			c.SetDeadline(start.Add(time.Minute))
			if _, err := io.WriteString(c, tt.send); err != nil {
				t.Fatal(err)
			}
			h := make([]byte, binaryHeaderLen)
			if _, err := io.ReadFull(c.r, h); err != nil {
				t.Fatalf("no binary response after %v: read %q: %v", time.Since(start).Round(time.Millisecond), h, err)
			}
			if h[0] != binaryResMagic || h[1] != tt.opcode {
				t.Errorf("magic %#x opcode %#x, want %#x %#x", h[0], h[1], binaryResMagic, tt.opcode)
			}
			if st := binary.BigEndian.Uint16(h[6:]); st != binaryUnknownCmd {
				t.Errorf("status %#04x, want %#04x (unknown command)", st, binaryUnknownCmd)
			}
			if op := binary.BigEndian.Uint32(h[12:]); op != tt.opaque {
				t.Errorf("opaque %#x, want the request's %#x", op, tt.opaque)
			}
			if keyLen, extLen := binary.BigEndian.Uint16(h[2:]), h[4]; keyLen != 0 || extLen != 0 {
				t.Errorf("key length %d, extras length %d, want 0", keyLen, extLen)
			}
			body := make([]byte, binary.BigEndian.Uint32(h[8:]))
			if _, err := io.ReadFull(c.r, body); err != nil {
				t.Fatalf("body: read %q: %v", body, err)
			}
			if !strings.Contains(string(body), "text protocol") {
				t.Errorf("body %q does not say what the server speaks", body)
			}
			// The close follows the reply; a short header waits up to
			// binaryReadTimeout for the rest first.
			if _, err := c.r.ReadByte(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the response: %v, want the connection closed", err)
			}
		})
	}

	c := dial(t, s.addr)
	c.exchange("text still served", "get q\r\n", "VALUE q 0 1\r\nx\r\nEND\r\n")
	if got, want := c.stats()["binary_refused"], strconv.Itoa(len(tests)); got != want {
		t.Errorf("STAT binary_refused %s, want %s", got, want)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(s.out.String(), "refused a binary-protocol request"); n != 1 {
		t.Errorf("the refusal was logged %d times, want once:\n%s", n, s.out.String())
	}
}
