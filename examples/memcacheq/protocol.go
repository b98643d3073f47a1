package main

import (
	"bytes"
	"strconv"
)

// The memcached text protocol, the subset a queue can honour, with
// Kestrel's options on the names a get asks for (reads.go).
//
//	set <queue> <flags> <exptime> <bytes> [noreply]\r\n<data>\r\n   → STORED, NOT_STORED (full)
//	get <key>*\r\n   (and gets)   → VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n ... END
//	                                 (at most one VALUE per distinct key)
//	        <key> is <queue>[+<group>][/<option>...], options open, close, abort, peek, t=<ms>
//	delete <queue>[+<group>] [0] [noreply]\r\n   → DELETED, NOT_FOUND
//	stats\r\n → STAT <name> <value>\r\n ... END   version\r\n → VERSION <major>.<minor>.<patch>\r\n   quit\r\n
//
// Replies to bad input: ERROR for a command this server does not know,
// CLIENT_ERROR <why> for a known command used wrongly or one a queue cannot
// do (incr, add, ...), SERVER_ERROR <why> when the server fails. A command
// that ends in noreply gets no reply at all, errors included, as with
// memcached (the server counts and logs what it refused). A command whose
// first byte is 0x80 is a binary-protocol request: it gets a binary error
// response and the connection is closed (binary.go).

// maxLine is the longest command line accepted, terminator included. A
// get line holds at most a few hundred queue names before it hits this.
const maxLine = 8192

// maxNameLen is the longest queue name.
const maxNameLen = 64

// command is one parsed command line.
type command struct {
	name string // "get", "gets", "set", "delete", "stats", "version", "quit"
	// keys are get's distinct keys as the client wrote them (its VALUE
	// lines repeat them), or the one queue of a set, or the queue or
	// group of a delete.
	keys    []string
	reads   []readKey // get, gets: keys[i] parsed
	flags   uint32    // set: the client's opaque flags, returned by get
	exptime int64     // set: parsed and ignored; a queue's events do not expire
	// noreply: the line ends in noreply, so no reply is written, not
	// even an error. It is set even when the line is otherwise refused,
	// for the commands memcached gives noreply (noreplyCommands).
	noreply bool
	// dataLen is the length of the data block that follows the line, or -1
	// when none does. It is set even when the line is otherwise refused, so
	// that the server can skip the block and stay in step with the client.
	dataLen int64
}

// protoError is a refused command line: ERROR (unknown command) or
// CLIENT_ERROR (a known command used wrongly).
type protoError struct {
	unknown bool
	msg     string
}

func (e *protoError) Error() string {
	if e.unknown {
		return "ERROR"
	}
	return "CLIENT_ERROR " + e.msg
}

func clientError(msg string) *protoError { return &protoError{msg: msg} }

// refused lists the memcached commands a queue cannot do, with the reason
// given to the client. The storage commands among them carry a data block,
// which the server skips.
var refused = map[string]string{
	"add":       "add is not supported by a queue; use set",
	"replace":   "replace is not supported by a queue; use set",
	"append":    "append is not supported by a queue; use set",
	"prepend":   "prepend is not supported by a queue; use set",
	"cas":       "cas is not supported by a queue; use set",
	"incr":      "incr is not supported by a queue",
	"decr":      "decr is not supported by a queue",
	"touch":     "touch is not supported by a queue",
	"gat":       "gat is not supported by a queue; use get",
	"gats":      "gats is not supported by a queue; use get",
	"flush_all": "flush_all is not supported by a queue",
	"verbosity": "verbosity is not supported",
}

// noreplyCommands are the commands memcached accepts noreply on, as the
// last word of the line; it silences every reply to the command, errors
// included, even when the line is refused (memcached's set_noreply_maybe).
var noreplyCommands = map[string]bool{
	"set": true, "add": true, "replace": true, "append": true, "prepend": true, "cas": true,
	"delete": true, "incr": true, "decr": true, "touch": true, "flush_all": true, "verbosity": true,
}

// parseCommand parses one command line, without its terminator. It never
// touches the network: the server does what the command says.
func parseCommand(line []byte) (command, error) {
	cmd := command{dataLen: -1}
	fields := bytes.Fields(line)
	if len(fields) == 0 {
		return cmd, &protoError{unknown: true}
	}
	cmd.name = string(fields[0])
	args := fields[1:]
	if noreplyCommands[cmd.name] && len(args) > 0 && string(args[len(args)-1]) == "noreply" {
		cmd.noreply = true
	}
	switch cmd.name {
	case "get", "gets":
		if len(args) == 0 {
			return cmd, clientError("get needs at least one queue name")
		}
		// A key given twice is taken once: a second item under the same
		// key would be lost by the clients that key replies by name.
		var seen map[string]bool // for a multi-get only
		for _, a := range args {
			k, err := parseReadKey(a)
			if err != nil {
				cmd.keys, cmd.reads = nil, nil
				return cmd, err
			}
			if len(args) > 1 {
				if seen == nil {
					seen = make(map[string]bool, len(args))
				}
				if seen[k.raw] {
					continue
				}
				seen[k.raw] = true
			}
			cmd.keys = append(cmd.keys, k.raw)
			cmd.reads = append(cmd.reads, k)
		}
		return cmd, nil
	case "set":
		return parseSet(cmd, args)
	case "delete":
		return parseDelete(cmd, args)
	case "stats":
		if len(args) > 0 {
			return cmd, clientError("stats " + printable(args[0]) + " is not supported; use stats")
		}
		return cmd, nil
	case "version", "quit":
		if len(args) > 0 {
			return cmd, clientError(cmd.name + " takes no arguments")
		}
		return cmd, nil
	}
	if why, ok := refused[cmd.name]; ok {
		switch cmd.name {
		case "add", "replace", "append", "prepend", "cas":
			// <cmd> <key> <flags> <exptime> <bytes> ...: skip the block.
			if len(args) >= 4 {
				if n, err := strconv.ParseInt(string(args[3]), 10, 64); err == nil && n >= 0 {
					cmd.dataLen = n
				}
			}
		}
		return cmd, clientError(why)
	}
	cmd.name = ""
	return cmd, &protoError{unknown: true}
}

// parseSet parses set <queue> <flags> <exptime> <bytes> [noreply].
func parseSet(cmd command, args [][]byte) (command, error) {
	if len(args) >= 4 {
		// Known first, so that the block is skipped if the line is refused.
		if n, err := strconv.ParseInt(string(args[3]), 10, 64); err == nil && n >= 0 {
			cmd.dataLen = n
		}
	}
	if len(args) < 4 || len(args) > 5 {
		return cmd, clientError("bad command line format: set <queue> <flags> <exptime> <bytes> [noreply]")
	}
	if cmd.dataLen < 0 {
		return cmd, clientError("bad data length " + printable(args[3]))
	}
	if q, _, fanout := bytes.Cut(args[0], []byte{'+'}); fanout && validName(q) {
		return cmd, clientError("set " + printable(args[0]) + ": set the queue " + string(q) + "; each of its groups gets the item")
	}
	if !validName(args[0]) {
		return cmd, clientError(badName(args[0]))
	}
	cmd.keys = []string{string(args[0])}
	flags, err := strconv.ParseUint(string(args[1]), 10, 32)
	if err != nil {
		return cmd, clientError("bad flags " + printable(args[1]))
	}
	cmd.flags = uint32(flags)
	if cmd.exptime, err = strconv.ParseInt(string(args[2]), 10, 64); err != nil {
		return cmd, clientError("bad exptime " + printable(args[2]))
	}
	if len(args) == 5 && string(args[4]) != "noreply" {
		return cmd, clientError("bad command line format: expected noreply, got " + printable(args[4]))
	}
	return cmd, nil
}

// parseDelete parses delete <queue>[+<group>] [0] [noreply] (memcached
// still accepts a time of 0 there, from an older protocol).
func parseDelete(cmd command, args [][]byte) (command, error) {
	n := len(args)
	if cmd.noreply {
		n--
	}
	if n == 2 && string(args[1]) == "0" {
		n--
	}
	if n != 1 {
		return cmd, clientError("bad command line format: delete <queue>[+<group>] [noreply]")
	}
	k, err := parseReadKey(args[0])
	if err != nil {
		return cmd, err
	}
	if len(k.raw) != len(k.target()) {
		return cmd, clientError("delete takes a queue or a group, without options: " + printable(args[0]))
	}
	cmd.keys = []string{k.raw}
	cmd.reads = []readKey{k}
	return cmd, nil
}

// validName reports whether b is a queue name: 1 to 64 of [A-Za-z0-9_.-],
// and not "." or ".." (a queue is a directory under -dir).
func validName(b []byte) bool {
	if len(b) == 0 || len(b) > maxNameLen || string(b) == "." || string(b) == ".." {
		return false
	}
	for _, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}

func badName(b []byte) string {
	return "bad queue name " + printable(b) + ": want 1 to 64 of A-Z a-z 0-9 _ . - (not . or ..)"
}

// printable quotes a client's bytes for an error line: short, and with no
// byte that could end or forge a reply line.
func printable(b []byte) string {
	// At most maxQuoted characters however b is escaped (\xNN is four),
	// so that an error quoting two of them still fits a reply line.
	const maxQuoted = 64
	for n := len(b); ; n-- {
		q := strconv.QuoteToASCII(string(b[:n]))
		if len(q) <= maxQuoted {
			if n < len(b) {
				q += "..."
			}
			return q
		}
	}
}
