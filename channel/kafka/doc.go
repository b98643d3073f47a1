// Package kafka runs the transactions of a FileChannel over a Kafka topic,
// for when one machine is not enough (Flume's KafkaChannel). It is built on
// franz-go (github.com/twmb/franz-go).
//
//	kc, err := kafka.Open(kafka.Config{Brokers: brokers, Topic: "events", TransactionalID: "agent-1"})
//	tx, _ := kc.Begin()
//	tx.Put(channel.Event{Headers: h, Body: b})
//	err = tx.Commit() // one Kafka transaction, acknowledged by all in-sync replicas
//
//	tx, _ = kc.Begin()                  // takes for the consumer group Config.Group
//	ev, err := tx.TakeContext(ctx)      // waits for an event
//	err = tx.Commit()                   // commits the group's offsets; or Rollback: they come back
//
// The meaning is a FileChannel's where Kafka can give it:
//
//   - A put Commit is one Kafka transaction. Takers read committed records
//     only, so a put transaction's events become visible together or not
//     at all, and a rolled-back put is never seen. Commit returns once Kafka
//     committed it, and within Config.CommitTimeout: an error by then, never
//     a success it did not see (ErrOutcomeUnknown when Kafka was asked to
//     commit and did not answer).
//   - A take transaction holds the channel's member of the consumer group
//     from its first Take to its end, and no rebalance moves the member's
//     partitions meanwhile. Commit commits the group's offsets and returns
//     the error if that fails; Rollback moves the group's position back, so
//     the same events come back, in order, to the group's next take.
//   - c.Group(name) is another consumer group: every group gets every event
//     (broadcast); the members of one group, in this process or others,
//     share its events. A new group starts at the earliest retained record
//     (a FileChannel group starts at the tail), or where Config.StartAt
//     says for it: channel.Earliest, Latest or AtTime(t), mapped to
//     Kafka's start offsets.
//   - c.ResetGroup(name, p) commits the group's offsets at p (the log
//     start, the last stable offset, or ListOffsets by timestamp for
//     AtTime). Kafka resets only a stopped group: members elsewhere make
//     it fail (ErrGroupActive); this channel's member leaves for it and
//     joins again, and its take transaction open across the reset gets
//     channel.ErrGroupReset and commits nothing. channel.AfterEvent is
//     ErrUnsupported: Kafka records have no channel.EventID.
//   - Order is per partition. Config.KeyHeader names the header whose value
//     is the record key, which keeps one value's events in one partition.
//   - Close returns promptly with transactions open: their takes come back
//     to the group, their puts are never visible.
//
// What a FileChannel has and this does not: Event.ID (Event.Time is the
// record's timestamp, when the put was written), AfterEvent positions,
// capacity (the topic's retention
// bounds the backlog, and deletes old events whether they were taken or
// not), Len and Stats (the depth is the group's lag), dead letters, group
// filters (GroupConfig.Filter: Kafka has none broker-side, and Config has
// no field for one; a group gets every record), and the recovery tool. The same source and sink code runs on both backends
// through channel.Tx, as examples/pipeline shows (-kafka, -kafka-fake).
//
// docs/kafka.md covers when to move from the file channel, the options, the
// failure behaviour, metrics, and a comparison with Flume's KafkaChannel.
// The tests run against franz-go's in-process fake cluster (kfake), and
// against a real cluster with KAFKA_BROKERS set.
package kafka
