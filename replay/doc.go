// Package replay rebuilds the event queue after a restart or a crash.
//
// Recovery starts from the last complete checkpoint (the queue's ring as of
// write-order id W plus the transactions in flight at W), or from an empty
// queue when no usable checkpoint exists (a full replay). Run then reads the
// log records written after W from every log file of every data dir, merged
// into one stream in write-order-id order (the order the records were
// written, across all dirs), and applies only committed transactions:
//
//   - a put commit appends its events (including puts it had spilled to the
//     log before W) to the tail, in commit order;
//   - a take commit removes the events it took, wherever they are;
//   - a transaction with no commit record is ignored: its puts vanish, and
//     the events it had taken stay where they were; takes that were in flight
//     at W and never committed go back to the head in their original order.
//
// The work is linear in the bytes read: the commits are collected first and
// applied to the queue at the end. Taken events from the checkpointed ring
// are found by walking the ring from the head (takes remove from the head,
// so this walk is about as long as the number of takes); the few that are
// not found near the head are removed through the queue's btree index.
// Nothing scans the ring once per event.
//
// Padding records (left by channel.Repair over damaged regions) are stepped
// over, and count as damage for the commit-count check. Options.Progress
// reports how far a long replay has come.
//
// Replay reads files through vfs.FS and never writes them; truncating torn
// tails and rewriting the checkpoint are the caller's business.
//
// # Read-only tools
//
// Verify checks a closed channel's files and reports every inconsistency
// (per consumer group); ListEvents lists the queue the channel would
// recover for a consumer group, event by event, with each event's delivery
// count (groups with MaxDeliveries; Report.Groups has each group's counts
// too). Both copy the checkpoint files into memory and only read the data
// dirs, so they take no lock and write nothing (channel.Verify takes the
// locks); they must not run while the channel is open.
//
// Which channel each directory belongs to (the channel.id files) is
// internal/owner's: Verify reports a directory of another channel or a
// damaged channel.id where the channel's Open, Repair and Rebuild refuse
// them (channel.ErrForeignDir).
package replay
