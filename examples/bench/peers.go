package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	diskqueue "github.com/nsqio/go-diskqueue"
	"github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/opt"
)

// peerPutMeters returns meters for the peers' puts, run beside
// filechannel's: go-diskqueue v1.1.0 (nsqd's disk queue) with SyncEvery=1
// (its strongest setting: an fsync per event) and SyncEvery=100 (one per
// 100, like a batch of 100), and goleveldb v1.0.0 with a Sync write batch
// of 100. go-diskqueue's Put returns once the message is written, BEFORE
// any fsync: its goroutine fsyncs the file (and rewrites its metadata file)
// after every SyncEvery operations, before it serves the next one.
func (b *bench) peerPutMeters() ([]*meter, []func() error, error) {
	var ms []*meter
	var closers []func() error
	for _, every := range []int64{1, 100} {
		dir, err := b.fresh(fmt.Sprintf("diskqueue-%d", every))
		if err != nil {
			return ms, closers, err
		}
		dq := newDiskQueue(dir, every)
		closers = append(closers, func() error { return errors.Join(dq.Close(), os.RemoveAll(dir)) })
		ms = append(ms, &meter{
			res: Result{ID: fmt.Sprintf("go-diskqueue/put/syncevery=%d", every), System: "go-diskqueue",
				Op: fmt.Sprintf("put, SyncEvery=%d", every), Batch: int(every), Producers: 1,
				Note: "Put returns BEFORE its fsync (not durable when it returns)"},
			max: b.sz.maxEvents,
			run: func(budget time.Duration, max int64) (int64, error) {
				var n int64
				for start := time.Now(); until(start, budget, n, 1, max); n++ {
					if err := dq.Put(b.body); err != nil {
						return n, err
					}
				}
				return n, nil
			},
		})
	}
	dir, err := b.fresh("leveldb-put")
	if err != nil {
		return ms, closers, err
	}
	db, err := leveldb.OpenFile(dir, nil)
	if err != nil {
		return ms, closers, err
	}
	closers = append(closers, func() error { return errors.Join(db.Close(), os.RemoveAll(dir)) })
	var next int64
	ms = append(ms, &meter{
		res: Result{ID: "goleveldb/put/batch=100", System: "goleveldb", Op: "sync write batch", Batch: 100, Producers: 1},
		max: b.sz.maxEvents,
		run: func(budget time.Duration, max int64) (int64, error) {
			var n int64
			for start := time.Now(); until(start, budget, n, 100, max); n += 100 {
				if err := levelPut(db, b.body, next, 100, true); err != nil {
					return n, err
				}
				next += 100
			}
			return n, nil
		},
	})
	return ms, closers, nil
}

// levelPut writes n events of body under keys from, from+1, ... in one batch.
func levelPut(db *leveldb.DB, body []byte, from int64, n int, sync bool) error {
	var key [8]byte
	batch := new(leveldb.Batch)
	for i := range int64(n) {
		binary.BigEndian.PutUint64(key[:], uint64(from+i))
		batch.Put(key[:], body)
	}
	return db.Write(batch, &opt.WriteOptions{Sync: sync})
}

// newDiskQueue opens a go-diskqueue with nsqd's defaults (100 MiB files)
// and the given SyncEvery, logging nothing.
func newDiskQueue(dir string, syncEvery int64) diskqueue.Interface {
	quiet := func(diskqueue.LogLevel, string, ...interface{}) {}
	return diskqueue.New("bench", dir, 100<<20, 0, 1<<20, syncEvery, time.Second, quiet)
}

// leveldb measures goleveldb's reads: takeEvents events, written
// without sync just before, read by iterating (no deletes: a queue would
// also delete them).
func (b *bench) leveldb() error {
	dir, err := b.fresh("leveldb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := leveldb.OpenFile(dir, nil)
	if err != nil {
		return err
	}
	for n := 0; n < b.sz.takeEvents; n += 1000 {
		if err := levelPut(db, b.body, int64(n), 1000, false); err != nil {
			return errors.Join(err, db.Close())
		}
	}
	start := time.Now()
	it := db.NewIterator(nil, nil)
	var read int64
	for it.Next() {
		if len(it.Value()) != len(b.body) {
			break
		}
		read++
	}
	it.Release()
	d := time.Since(start)
	if err := it.Error(); err != nil || read < int64(b.sz.takeEvents) {
		return errors.Join(fmt.Errorf("leveldb read %d events of %d or more", read, b.sz.takeEvents), err, db.Close())
	}
	b.add(Result{ID: "goleveldb/read", System: "goleveldb", Op: "read by iterating", Producers: 1,
		Events: read, Bytes: read * 1024, Seconds: d.Seconds(), Note: "reads iterate without deleting; page cache"})
	return db.Close()
}
