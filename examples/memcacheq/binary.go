package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"time"
)

// The memcached binary protocol, only as far as refusing it: memcacheq
// speaks the text protocol. A command that starts with the binary request
// magic gets one binary error response, and the connection is closed.
//
// The request and response header, 24 bytes, integers big-endian (the
// memcached "Binary Protocol Revamped" specification):
//
//	off  len  request            our response
//	0    1    magic 0x80         magic 0x81
//	1    1    opcode             the request's opcode
//	2    2    key length         0
//	4    1    extras length      0
//	5    1    data type          0
//	6    2    vbucket id         status 0x0081 (unknown command)
//	8    4    total body length  length of the message that follows
//	12   4    opaque             the request's opaque
//	16   8    cas                0
//
// Why this answer. memcached itself answers a binary opcode it does not
// implement with status 0x0081 and a message, and every binary client turns
// that into an error for the request at once: libmemcached (memcstat -b,
// memccp -b, memccat -b) fails with "UNKNOWN READ FAILURE" in milliseconds,
// and memjs calls back with "Unknown command" (it matches the response to
// its request by the opaque, hence the echo). A text ERROR would not do:
// a binary client reads it as the first 7 bytes of a 24-byte header, and
// memjs, which has no handler for a closed connection, would wait forever.
// (memcached started with -B ascii reads the bytes as a text line and waits
// for a \n that a binary header seldom holds: the hang this avoids.)
// Closing afterwards is because the connection cannot get back in step: a
// binary client pipelines more binary requests, and one that reuses its
// connections sees the close.
const (
	binaryReqMagic     = 0x80
	binaryResMagic     = 0x81
	binaryHeaderLen    = 24
	binaryUnknownCmd   = 0x0081
	binaryRefusalText  = "Unknown command: memcacheq speaks only the memcached text protocol"
	binaryReadTimeout  = time.Second // for the rest of the header, and for the drain
	binaryWriteTimeout = time.Second
	// binaryDrainMax is the most bytes read and thrown away after the
	// reply (see refuseBinary).
	binaryDrainMax = 1 << 20
)

// refuseBinary answers the binary request at the head of r (its first byte,
// the magic, has been peeked) and returns; the caller closes c. The first
// refusal is logged; the rest are only counted (STAT binary_refused), so a
// client that retries cannot flood the log.
func (s *server) refuseBinary(c *conn, r *bufio.Reader) {
	if s.binaryRefused.Add(1) == 1 {
		s.log.Warn("refused a binary-protocol request: set the client to the text (ASCII) protocol; "+
			"later ones are only counted, in stats binary_refused", "remote", c.RemoteAddr().String())
	}
	var req [binaryHeaderLen]byte
	c.SetReadDeadline(time.Now().Add(binaryReadTimeout))
	io.ReadFull(r, req[:]) // a short header is answered all the same, with zeros for what is missing
	c.SetWriteDeadline(time.Now().Add(binaryWriteTimeout))
	if _, err := c.Write(binaryRefusal(req)); err != nil {
		return
	}
	// A lingering close: a socket closed with unread bytes in its receive
	// buffer (the request's body, pipelined requests) sends a reset, which
	// can destroy the reply before the client reads it. So send our FIN,
	// then read and drop what the client still sends until it closes,
	// binaryReadTimeout passes or binaryDrainMax bytes came.
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(binaryReadTimeout))
	io.CopyN(io.Discard, r, binaryDrainMax)
}

// binaryRefusal returns the response to the request whose header is req:
// status unknown command, with binaryRefusalText as its body.
func binaryRefusal(req [binaryHeaderLen]byte) []byte {
	b := make([]byte, binaryHeaderLen, binaryHeaderLen+len(binaryRefusalText))
	b[0] = binaryResMagic
	b[1] = req[1] // opcode
	binary.BigEndian.PutUint16(b[6:], binaryUnknownCmd)
	binary.BigEndian.PutUint32(b[8:], uint32(len(binaryRefusalText)))
	copy(b[12:16], req[12:16]) // opaque
	return append(b, binaryRefusalText...)
}
