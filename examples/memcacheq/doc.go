// Command memcacheq is a queue server that speaks the memcached text
// protocol, with a file channel behind each queue: fqueue's (and Kestrel's)
// idea with filechannel's durability. Any memcached client can produce and
// consume: set appends an item to a queue, get takes the item at its head.
//
//	go run ./examples/memcacheq            # listens on 127.0.0.1:22133, data in ./memcacheqdata
//	go run ./examples/memcacheq -addr :22133 -dir /var/lib/memcacheq -max-queues 100 -max-groups 2
//	go run ./examples/memcacheq -max-conns 256 -max-pending-bytes 16777216 -value-timeout 10s
//
// A session (Kestrel's reliable read is get <queue>/open, then /close):
//
//	$ printf 'set jobs 0 0 5\r\nhello\r\nset jobs 0 0 5\r\nworld\r\n' | nc -q1 127.0.0.1 22133
//	STORED
//	STORED
//	$ printf 'get jobs\r\nget jobs/open\r\nget jobs/close\r\nget jobs\r\n' | nc -q1 127.0.0.1 22133
//	VALUE jobs 0 5
//	hello
//	END
//	VALUE jobs/open 0 5
//	world
//	END
//	END
//	END
//	$ printf 'delete jobs\r\nversion\r\nstats\r\n' | nc -q1 127.0.0.1 22133
//	DELETED
//	VERSION 1.0.0
//	STAT pid 4242
//	...
//	STAT version 1.0.0
//	STAT implementation memcacheq-filechannel
//	...
//	STAT curr_items 0
//	STAT total_items 2
//	...
//	STAT queues 0
//	...
//	END
//
// # Commands
//
//	set <queue> <flags> <exptime> <bytes> [noreply]
//	        put one item and commit it; STORED once the commit is durable (fsync'd).
//	        flags are kept and returned by get; exptime is ignored (queued items do not expire).
//	        Every group of the queue gets the item too (see Groups).
//	get <key> [<key> ...]
//	        <key> is <queue>[+<group>][/<option>...]: read the queue, or one of its
//	        groups, as the options say (see Reliable reads); without options, take
//	        the head item, the take committed before the reply is written. A queue
//	        that is empty or does not exist is a miss (END). The VALUE line repeats
//	        the key as sent. A key given twice counts once (get jobs jobs takes one
//	        item): clients that key the replies of a multi-get by name would keep
//	        one VALUE and lose the others.
//	gets    the same, with a cas field of 0.
//	delete <queue>[+<group>] [noreply]
//	        remove a queue (with its groups) or one group, if it holds nothing,
//	        queued or open (see Queues).
//	stats   pid, uptime, time, version, implementation (memcacheq-filechannel),
//	        curr_connections, total_connections, cmd_get (keys read, peeks included,
//	        so cmd_get = get_hits + get_misses; /close and /abort alone read
//	        nothing), cmd_set, get_hits, get_misses, curr_items (items queued, all
//	        queues and groups), total_items (stored since start), bytes
//	        (Stats().LogBytes: the queues' data log files, which still hold taken
//	        items until their file is deleted), queues, binary_refused
//	        (binary-protocol requests refused), the limits' counters (see Limits:
//	        max_connections, rejected_connections, accept_errors, pending_bytes,
//	        store_no_memory, value_timeouts), not_stored (sets refused because the
//	        queue was full), noreply_refused (noreply commands refused without a
//	        reply), open_transactions (items held open now, all connections),
//	        canceled_transactions (open items given back: /abort, a closed
//	        connection, a /close whose commit failed), and for each queue
//	        queue_<name>_items, queue_<name>_bytes, queue_<name>_open_transactions,
//	        and for each of its groups queue_<name>+<group>_items and
//	        queue_<name>+<group>_open_transactions.
//	version VERSION 1.0.0: this server's own version, numeric as clients expect
//	        (libmemcached refuses a non-numeric one, and a major version of 0).
//	quit
//
// add, replace, append, prepend, cas, incr, decr, touch, gat, gats,
// flush_all and verbosity get CLIENT_ERROR with the reason (the data block
// of a storage command is read and skipped); any other word gets ERROR.
//
// noreply (the last word of set, delete and the other commands memcached
// takes it on) means no reply at all, errors included, as memcached does:
// the client reads none, and would take an error line for the reply to
// its next command (pymemcache, which sets with noreply by default, then
// fails the get that the server has taken an item for). A refusal the
// client is not told of is counted (STAT noreply_refused) and logged (a
// warning at most once a minute); a noreply set is fire-and-forget.
//
// # Replies
//
// Every reply a command can get:
//
//	STORED                  set: the item is committed (durable)
//	NOT_STORED              set: the queue (or one of its groups) stayed full for
//	                        a second; back-pressure: take items, retry later
//	VALUE ... END, END      get: the items read; END alone: nothing to read
//	DELETED, NOT_FOUND      delete: removed; no such queue or group
//	STAT ... END            stats
//	VERSION 1.0.0           version
//	ERROR                   an unknown command
//	CLIENT_ERROR <why>      a command used wrongly, or refused for what the client
//	                        asked: a bad name, option or data block, a value over
//	                        -max-value, a set to a group, a command a queue cannot
//	                        do, delete of a queue or group that holds items, a
//	                        new queue beyond -max-queues (too many queues) or
//	                        group beyond -max-groups (too many groups), a get of
//	                        a queue the connection holds an item of (the
//	                        connection is then closed; see Reliable reads)
//	SERVER_ERROR <why>      the server's trouble: out of disk space, out of memory
//	                        storing object (-max-pending-bytes, see Limits), too
//	                        many connections (then closed), shutting down, or an
//	                        error of the channel (a failed write or commit)
//
// A full queue is NOT_STORED and not SERVER_ERROR because clients take
// SERVER_ERROR for a failing server: the npm memcached client (default
// options) stops using it for 30s, the gets that would drain the queue
// included. A limit a client reaches by its requests (-max-queues,
// -max-groups) is CLIENT_ERROR for the same reason.
//
// # Reliable reads
//
// Twitter's Kestrel, the best-known memcache-protocol queue, lets a get
// take an item tentatively; memcacheq maps its options onto take
// transactions (a key's options, separated by /, in any order):
//
//	get q/open      take the head item into a take transaction of this
//	                connection: no one else gets it. One open item per queue
//	                (or group) per connection.
//	get q/close     commit the open item: it is gone. Without one, nothing
//	                happens, so /close can go on every get.
//	get q/abort     roll the open item back to the head: the next get has it.
//	get q/close/open  commit the last item, open the next (Kestrel's loop).
//	get q/peek      the head item, left in the queue.
//	get q/t=500     wait up to 500 ms for an item (or for the queue's first
//	                set), then miss; at most -idle-timeout. With open or peek
//	                too: get q/t=500/open.
//
// An open item whose connection closes (the client died, quit, or was
// closed by -idle-timeout or a shutdown) goes back to the head of its
// queue, in order: the next reader gets it first. Items given back by
// several connections each go to the head as their connection closes. A
// restart finds an item that was open in the queue.
//
// As in Kestrel, peek and abort go with neither open nor close, nor with
// each other (CLIENT_ERROR), and a get that would take from a queue the
// connection has an item open on (get q, or get q/open without /close) is
// refused with CLIENT_ERROR and the connection is closed, which gives the
// item back; a multi-get so refused takes nothing. Kestrel sends ERROR;
// memcacheq gives the reason. Unlike Kestrel, the VALUE line repeats the
// key as sent, options included (clients match replies to the keys they
// sent; pymemcache fails on any other), and a get may name several keys,
// each read in turn.
//
// A peek is a take rolled back at once: while it runs (microseconds), a
// get on another connection takes the next item.
//
// # Groups
//
// Kestrel's fan-out queues are consumer groups of the queue's channel
// (channel.FileChannel.AddGroup): get q+audit reads group audit of queue
// q. The first get that names a group of an existing queue creates it
// (durably); from then on every set of q reaches q and each of its
// groups, which are read independently, with the same options. Items
// stored before a group was created are not in it. A set names the
// queue, never a group (CLIENT_ERROR). Group names are 1 to 64 of a-z 0-9
// _ . - (the channel's rule). -max-groups (default 4) caps the groups of a
// queue; a get that would create one more gets CLIENT_ERROR too many
// groups. Groups outlive a restart; delete q+audit removes one that is
// empty.
//
// A group holds up to the queue's capacity: when q or any of its groups is
// full, a set waits a second for room, then gets NOT_STORED. A group that
// no one reads fills, and then stops every set of its queue: read it, or
// delete it once drained.
//
// # Queues
//
// A queue is a file channel in -dir/<name>/ (checkpoint/ and data/). The
// first set that stores an item in a queue creates it; a get, a delete or
// a set that fails (too large, no disk space, ...) creates none. A start
// opens every queue found under -dir. Names are 1 to 64 of A-Z a-z 0-9 _
// . - (not "." or "..").
//
// -max-queues (default 64) caps how many queues exist. A set that needs
// one more removes the empty queue (nothing queued or open, no groups, no
// command using it) that was used least recently, and with none gets
// "CLIENT_ERROR too many queues" (the queues that exist go on working). So clients that invent
// names (memcslap's random keys) can fill the server with queues that
// hold items, never with empty ones, and never stop the others.
//
// delete <queue> removes a queue that holds nothing, queued or open, in
// it or in any of its groups: DELETED, and its directory is deleted (by a
// rename to <name>~removed first, so that a crash leaves either the queue
// or a directory the next start deletes). A queue that holds items gets
// CLIENT_ERROR and stays: a delete never discards an item (memcached
// clients send delete to invalidate a cache entry; Kestrel's delete
// discards the queue's items); to remove such a queue, take its items
// first. flush_all is refused for the same reason.
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
//   - checkpoint/group-N/, for each group: its ring, (1029 + capacity) × 8
//     bytes like the queue's, 0.8 MB at the default capacity.
//
// An empty queue costs about 1.1 MB stopped and at most 1.4 MB while the
// server runs: 90 MB for the default 64 queues, plus 0.8 MB per group (at
// most 4 a queue: 205 MB more). A set gets SERVER_ERROR out of disk space
// while the data directory's file system has less than -min-free free (the
// channel's MinimumRequiredSpace: 500 MiB unless given; 0 = no minimum).
//
// # Delivery
//
// A set is durable when the client reads STORED. A client that loses the
// connection before the reply does not know, and a retry can store the
// item twice: at-least-once, as with any queue.
//
// A plain get is at-most-once: the take is committed (fsync'd) before the
// VALUE is written, so if the connection breaks or the server dies between
// the commit and the client reading the reply, that item is gone. A
// reliable read (get q/open, then get q/close once the item is handled) is
// at-least-once: an item whose client dies before /close is delivered
// again, so its handling should be idempotent.
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
//   - Descriptors: a queue holds 4 open, up to 8 for a moment, and one
//     more for each of its groups. An accept
//     that fails for a reason that passes (EMFILE, ENFILE, ECONNABORTED,
//     ... and timeouts) is retried after a pause that doubles from 5ms to
//     1s, so a server out of descriptors goes on serving the connections it
//     has and accepts again when one closes; STAT accept_errors counts them.
//     A start warns when ulimit -n is below -max-conns + (8 + -max-groups)
//     × -max-queues + 32. Any other accept error stops the server.
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
// -idle-timeout each. An open item is held until its connection closes
// it, aborts it or closes: a client that opens an item and goes silent
// holds it for -idle-timeout (default 5m), then it goes back. A get that
// waits (t=) holds its connection's goroutine for at most -idle-timeout.
//
// # Shutdown
//
// On Ctrl-C or SIGTERM the server stops accepting, closes the connections
// that wait for a command, ends the gets that wait (t=) with a miss, lets
// commands in progress finish (up to 5s), gives the open items back, then
// closes every queue (which writes a checkpoint).
package main
