// Command memcacheq is a queue server that speaks the memcached text
// protocol, with a file channel behind each queue: fqueue's (and Kestrel's)
// idea with filechannel's durability. Any memcached client can produce and
// consume: set appends an item to a queue, get takes the item at its head.
//
//	go run ./examples/memcacheq            # listens on 127.0.0.1:22133, data in ./memcacheqdata
//	go run ./examples/memcacheq -addr :22133 -dir /var/lib/memcacheq -max-queues 100
//	go run ./examples/memcacheq -max-conns 256 -max-pending-bytes 16777216 -value-timeout 10s
//
// A session:
//
//	$ printf 'set jobs 0 0 5\r\nhello\r\nset jobs 0 0 5\r\nworld\r\n' | nc -q1 127.0.0.1 22133
//	STORED
//	STORED
//	$ printf 'get jobs jobs\r\nget jobs\r\nget jobs\r\n' | nc -q1 127.0.0.1 22133
//	VALUE jobs 0 5
//	hello
//	END
//	VALUE jobs 0 5
//	world
//	END
//	END
//	$ printf 'delete jobs\r\nversion\r\nstats\r\n' | nc -q1 127.0.0.1 22133
//	CLIENT_ERROR delete is not supported by a queue; get takes an item
//	VERSION 1.0.0
//	STAT pid 4242
//	...
//	STAT version 1.0.0
//	STAT implementation memcacheq-filechannel
//	...
//	STAT curr_items 0
//	STAT total_items 2
//	...
//	STAT queue_jobs_items 0
//	STAT queue_jobs_bytes 256
//	END
//
// # Commands
//
//	set <queue> <flags> <exptime> <bytes> [noreply]
//	        put one item and commit it; STORED once the commit is durable (fsync'd).
//	        flags are kept and returned by get; exptime is ignored (queued items do not expire).
//	get <queue> [<queue> ...]
//	        take one item per distinct name, each take committed before the reply is
//	        written; a queue that is empty or does not exist is a miss. A name given
//	        twice counts once (get jobs jobs takes one item): clients that key the
//	        replies of a multi-get by name would keep one VALUE and lose the others.
//	gets    the same, with a cas field of 0.
//	stats   pid, uptime, time, version, implementation (memcacheq-filechannel),
//	        curr_connections, total_connections, cmd_get (distinct names asked for, so
//	        cmd_get = get_hits + get_misses), cmd_set, get_hits, get_misses, curr_items
//	        (items queued, all queues), total_items (stored since start), bytes
//	        (Stats().LogBytes: the queues' data log files, which still hold taken items
//	        until their file is deleted), queues, binary_refused (binary-protocol
//	        requests refused), the limits' counters (see Limits: max_connections,
//	        rejected_connections, accept_errors, pending_bytes, store_no_memory,
//	        value_timeouts), and queue_<name>_items, queue_<name>_bytes for each queue.
//	version VERSION 1.0.0: this server's own version, numeric as clients expect
//	        (libmemcached refuses a non-numeric one, and a major version of 0).
//	quit
//
// add, replace, append, prepend, cas, delete, incr, decr, touch, gat, gats,
// flush_all and verbosity get CLIENT_ERROR with the reason (the data block
// of a storage command is read and skipped); any other word gets ERROR.
//
// The binary protocol is not spoken. A binary request (a command whose
// first byte is 0x80) gets a binary response with status 0x0081 (unknown
// command), and the connection is closed, so that binary clients (memcstat
// -b, memccp -b, memjs) fail at once instead of waiting for a timeout. The
// first is logged; stats binary_refused counts them all.
//
// # Queues
//
// A queue is a file channel in -dir/<name>/ (checkpoint/ and data/). The
// first set that names a queue creates it; a start opens every queue found
// under -dir. Names are 1 to 64 of A-Z a-z 0-9 _ . - (not "." or "..").
// -max-queues caps how many queues exist: a set that would create one more
// gets SERVER_ERROR. A set to a full queue waits a second for room, then gets
// SERVER_ERROR.
//
// A queue holds up to its capacity of items. Without -capacity a new queue
// gets 100,000 and an existing one keeps the capacity recorded in its
// checkpoint (a queue made by an older memcacheq, whose default was
// 1,000,000, keeps 1,000,000, and may hold more than 100,000 items).
// -capacity N (not 0) gives every queue N, resizing the existing ones at
// start; the start fails if a queue holds more than N items.
//
// # Disk
//
// Each queue costs:
//   - checkpoint/checkpoint, the ring of item pointers: (1029 + capacity) × 8
//     bytes, allocated in full when the queue is created, and mapped into
//     memory: 808,232 bytes (0.8 MB) at the default 100,000, 8 MB at
//     1,000,000. With the default -max-queues 64, at most 52 MB.
//   - checkpoint.meta, inflightputs, inflighttakes, groups, channel.id:
//     tens to hundreds of bytes.
//   - data/space.reserve: 262,144 bytes (256 KiB), removed when a write
//     meets a full disk, so that gets (about 61 bytes of take record each)
//     can go on until a checkpoint deletes a log file.
//   - data/log-NNNNNNNNNN, the items. A set adds its value plus about 54
//     bytes (more with flags), a get about 61 bytes. While the server runs,
//     the active log file is laid out (zero-filled) up to 256 KiB ahead of
//     its writes, and trimmed back to its records at shutdown. A new log
//     file starts at every start and when one reaches 16 MiB; a checkpoint
//     (every 30s after a write, and at shutdown) deletes the files that no
//     queued item is in. So a queue's log holds its queued items and up to
//     16 MiB of taken ones, more while an old item keeps its file.
//
// An empty queue costs about 1.1 MB stopped and at most 1.4 MB while the
// server runs: 90 MB for the default 64 queues. A set gets SERVER_ERROR
// out of disk space while the data directory's file system has less than
// -min-free free (the channel's MinimumRequiredSpace: 500 MiB unless
// given; 0 = no minimum).
//
// # Delivery
//
// A set is durable when the client reads STORED. A client that loses the
// connection before the reply does not know, and a retry can store the
// item twice: at-least-once, as with any queue.
//
// A get is at-most-once: the take is committed (fsync'd) before the VALUE
// is written, so if the connection breaks or the server dies between the
// commit and the client reading the reply, that item is gone. Committing
// after the client has the reply would make it at-least-once but needs a
// protocol extension (Kestrel's get <queue>/open and /close); this example
// keeps plain memcached semantics.
//
// # Bad input
//
// An unknown command gets ERROR; a malformed one CLIENT_ERROR. The
// connection stays usable after a line longer than 8192 bytes (skipped), a
// value over -max-value (its data block is skipped when it is at most 64
// MiB; past that the connection is closed) and a data block not followed by
// \r\n (CLIENT_ERROR bad data chunk; the rest of that line is skipped). A
// client that sends fewer bytes than it declared is out of step with the
// server, as with memcached, until -value-timeout closes it (see Limits).
//
// # Limits
//
// What one client, or many, can hold of the server is bounded. Each limit
// has a reply or a close, a counter in stats, and a log line: a warning at
// most once a minute for refusals and failed accepts (clients can cause
// them at will), an info line (-v) for each stalled value.
//
//   - -max-conns (default 1024): the most connections served at once. One
//     more is accepted, sent "SERVER_ERROR too many connections" and closed
//     (a client that had already sent its command may see the connection
//     reset instead); STAT rejected_connections counts them, STAT
//     max_connections is the limit. A connection costs up to about 20 KiB of
//     memory (its buffers and goroutine) and one descriptor.
//   - Descriptors: a queue holds 4 open, up to 8 for a moment. An accept
//     that fails for a reason that passes (EMFILE, ENFILE, ECONNABORTED,
//     ... and timeouts) is retried after a pause that doubles from 5ms to
//     1s, so a server out of descriptors goes on serving the connections it
//     has and accepts again when one closes; STAT accept_errors counts them.
//     A start warns when ulimit -n is below -max-conns + 8 × -max-queues +
//     32. Any other accept error stops the server.
//   - -max-pending-bytes (default 64 MiB, at least -max-value): the most
//     bytes of values held at once, all connections together, from the start
//     of a set's data block until its commit ends. A set whose value does
//     not fit waits up to a second for other sets to finish, then its data
//     block is read and thrown away and it gets "SERVER_ERROR out of memory
//     storing object", memcached's own reply when a store finds no memory:
//     clients know it (libmemcached reports a memory allocation failure),
//     the connection stays usable, and the set may be retried. STAT
//     pending_bytes is the total held now, STAT store_no_memory counts the
//     refusals.
//   - -value-timeout (default 30s; 0 = -idle-timeout): a set's data block
//     (or a refused command's, being skipped) must all arrive within it. A
//     client that sends a set line and stalls mid-value is closed and the
//     bytes it held are freed; STAT value_timeouts counts them.
//   - -idle-timeout (default 5m; 0 = never): a connection that sends no
//     command for this long is closed, and so is one whose command line does
//     not end within it. The replies to a command have as long to leave,
//     counted from the start of the command.
//
// A get holds the value it took until its reply is written, one at a time
// per connection: at most -max-conns × -max-value, for at most
// -idle-timeout each.
//
// # Shutdown
//
// On Ctrl-C or SIGTERM the server stops accepting, closes the connections
// that wait for a command, lets commands in progress finish (up to 5s),
// then closes every queue (which writes a checkpoint).
package main
