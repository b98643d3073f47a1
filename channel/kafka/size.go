package kafka

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flumego/filechannel/channel"
)

// The size of an event on Kafka: what Put checks against
// Config.MaxEventSize. It is the size of a record batch holding the event
// alone, as the producer counts it against its batch limit
// (kgo.ProducerBatchMaxBytes, which the channel sets to MaxEventSize):
//
//	bytes  field
//	    4  the batch's length prefix in the produce request: an int32
//	       before produce v9, a uvarint of 1 to 5 bytes since (Kafka 2.4);
//	       counted as max(4, its uvarint length)
//	   61  the batch header: base offset 8, batch length 4, leader epoch 4,
//	       magic 1, CRC 4, attributes 2, last offset delta 4, first
//	       timestamp 8, max timestamp 8, producer id 8, producer epoch 2,
//	       base sequence 4, record count 4
//	       the record:
//	  v    its length
//	  1    attributes
//	  1    timestamp delta (0: the batch's first record)
//	  1    offset delta (0)
//	  v+k  key length (-1: none) and key (the KeyHeader's value)
//	  v+b  value length and value (the body)
//	  v    header count
//	       per header: v + name, v + value
//
// v is a zigzag varint: 1 byte up to 63, 2 up to 8,191, 3 up to 1,048,575.
// A header-less event of up to 1 MiB therefore costs at most 76 bytes more
// than its body, and each header 2 more than its name and value when both are under
// 64 bytes.
//
// The broker checks the topic's max.message.bytes against the batch without
// its length prefix (61 + the record), after compression; the producer
// checks before compression (it sends a batch uncompressed when compression
// would grow it). So an event Put accepts leaves both, on its own, within
// MaxEventSize. Against franz-go it is exact with a 4-byte prefix (which
// it counts too until it learns the broker's produce version), and
// conservative by at most 3 bytes with a uvarint one.
const (
	batchLengthPrefix = 4
	batchHeaderSize   = 61
	// minBatchMaxBytes is the least kgo.ProducerBatchMaxBytes franz-go takes.
	minBatchMaxBytes = 512
)

// eventSize is the size of e's record batch, as the table above counts it:
// what Put compares with MaxEventSize. It reads e only (no copy), in time
// linear in its header count, and cannot overflow: lengths add up in int64.
func eventSize(e channel.Event, keyHeader string) int64 {
	rec := int64(1 + 1 + 1) // attributes, timestamp delta, offset delta
	key := int64(-1)
	if keyHeader != "" && len(e.Headers) > 0 {
		if v, ok := e.Headers[keyHeader]; ok {
			key = int64(len(v))
		}
	}
	rec += bytesLen(key)
	rec += bytesLen(int64(len(e.Body)))
	rec += varintLen(int64(len(e.Headers)))
	for k, v := range e.Headers {
		rec += bytesLen(int64(len(k))) + bytesLen(int64(len(v)))
	}
	rec += varintLen(rec) // the record's length
	batch := batchHeaderSize + rec
	return max(batchLengthPrefix, uvarintLen(uint64(batch)+1)) + batch
}

// bytesLen is the size of a length-prefixed field of n bytes (-1: null).
func bytesLen(n int64) int64 { return varintLen(n) + max(n, 0) }

// varintLen is the length of n as a zigzag varint (Kafka's varint and
// varlong).
func varintLen(n int64) int64 { return uvarintLen(uint64(n<<1) ^ uint64(n>>63)) }

// uvarintLen is the length of u as an unsigned varint: 7 bits a byte.
func uvarintLen(u uint64) int64 {
	n := int64(1)
	for ; u >= 0x80; u >>= 7 {
		n++
	}
	return n
}

// producerBatchLimit is the largest record batch cl produces to topic:
// its kgo.ProducerBatchMaxBytes, or less when kgo.BrokerMaxWriteBytes
// leaves less room in a produce request (the request's own bytes counted
// generously: franz-go counts fewer, in maxRecordBatchBytesForTopic) or
// kgo.MaxBufferedBytes refuses a record of that size.
func producerBatchLimit(cl *kgo.Client, topic, transactionalID string) int64 {
	limit := int64(1000012) // franz-go's default
	if fn, ok := cl.OptValue(kgo.ProducerBatchMaxBytesFn).(func(string) int32); ok && fn != nil {
		limit = int64(fn(topic))
	}
	if w, ok := cl.OptValue(kgo.BrokerMaxWriteBytes).(int32); ok {
		id, _ := cl.OptValue(kgo.ClientID).(string)
		request := int64(64 + len(id) + len(transactionalID) + max(16, len(topic)))
		limit = min(limit, int64(w)-request)
	}
	if b, ok := cl.OptValue(kgo.MaxBufferedBytes).(int64); ok && b > 0 {
		limit = min(limit, b) // it counts a record's key, value and headers only
	}
	return limit
}
