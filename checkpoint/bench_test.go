package checkpoint

// Benchmarks. Reproduce with:
//
//	go test -run '^$' -bench . -benchmem ./checkpoint
//
// os = the local filesystem: slots read through a read-only mapping, written
// with pwrite (Write includes the fsyncs); mem = ReadAt/WriteAt store on
// vfs.MemFS.

import (
	"testing"

	"github.com/flumego/filechannel/eventqueue"
)

const benchCapacity = 1 << 20

// BenchmarkSetSlot streams SetSlot through the ring as AddTail does, with a
// checkpoint (Freeze, Thaw) every quarter lap so pages keep being copied.
func BenchmarkSetSlot(b *testing.B) {
	for _, k := range fsKinds {
		b.Run(k.name, func(b *testing.B) {
			fsys, dir := newDir(b, k)
			c, err := Create(fsys, dir, benchCapacity)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.SetBytes(8)
			b.ReportAllocs()
			b.ResetTimer()
			pos := 0
			for i := range b.N {
				c.SetSlot(pos, uint64(i)|1)
				if pos++; pos == benchCapacity {
					pos = 0
				}
				if pos%(benchCapacity/4) == 0 {
					c.Freeze()
					c.Thaw(true)
				}
			}
		})
	}
}

// BenchmarkSlot streams Slot through clean pages, as RemoveHead does after a
// checkpoint.
func BenchmarkSlot(b *testing.B) {
	for _, k := range fsKinds {
		b.Run(k.name, func(b *testing.B) {
			fsys, dir := newDir(b, k)
			c, err := Create(fsys, dir, benchCapacity)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.SetBytes(8)
			b.ReportAllocs()
			b.ResetTimer()
			var sum uint64
			for i := range b.N {
				sum += c.Slot(i & (benchCapacity - 1))
			}
			_ = sum
		})
	}
}

// BenchmarkQueueAddTailRemoveHead is the channel's steady state over a
// checkpoint: one put and one take per op.
func BenchmarkQueueAddTailRemoveHead(b *testing.B) {
	fsys, dir := newDir(b, fsKinds[0])
	c, err := Create(fsys, dir, benchCapacity)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	q, err := eventqueue.New(c, benchCapacity, 0, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := range benchCapacity / 2 {
		q.AddTail(eventqueue.NewPointer(1, uint32(i)))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		q.AddTail(eventqueue.NewPointer(1, uint32(i)))
		q.RemoveHead()
	}
}

// BenchmarkWrite checkpoints a 1M-slot ring with every page dirty.
func BenchmarkWrite(b *testing.B) {
	for _, k := range fsKinds {
		b.Run(k.name, func(b *testing.B) {
			fsys, dir := newDir(b, k)
			c, err := Create(fsys, dir, benchCapacity)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			st := &State{Meta: Meta{Capacity: benchCapacity, Size: benchCapacity}}
			b.SetBytes(benchCapacity * 8)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				for s := 0; s < benchCapacity; s += pageSlots {
					c.SetSlot(s, uint64(i+1))
				}
				st.WriteOrderID = uint64(i + 1)
				b.StartTimer()
				c.Freeze()
				if err := c.Write(st); err != nil {
					b.Fatal(err)
				}
				c.Thaw(true)
			}
		})
	}
}

// BenchmarkCreate creates the checkpoint file of a 1M-slot ring (8 MB),
// writing every byte of it and syncing it: the price of a file with no holes
// (about 0.5 ms when it was created sparse, on ext4).
func BenchmarkCreate(b *testing.B) {
	for _, k := range fsKinds {
		b.Run(k.name, func(b *testing.B) {
			fsys, dir := newDir(b, k)
			b.SetBytes(benchCapacity * 8)
			b.ReportAllocs()
			for range b.N {
				c, err := Create(fsys, dir, benchCapacity)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpen opens a checkpoint of a 1M-slot ring whose every page was
// written, with no live slot (live=0) and with every slot live (live=1M):
// the difference is the cost of checking the ring CRC.
func BenchmarkOpen(b *testing.B) {
	for _, k := range fsKinds {
		for _, live := range []struct {
			name string
			size int
		}{{"live=0", 0}, {"live=1M", benchCapacity}} {
			b.Run(k.name+"/"+live.name, func(b *testing.B) {
				fsys, dir := newDir(b, k)
				c, err := Create(fsys, dir, benchCapacity)
				if err != nil {
					b.Fatal(err)
				}
				for s := range benchCapacity {
					c.SetSlot(s, uint64(eventqueue.NewPointer(1, uint32(s))))
				}
				c.Freeze()
				err = c.Write(&State{Meta: Meta{WriteOrderID: 1, Capacity: benchCapacity, Head: 12345, Size: live.size}})
				c.Thaw(err == nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Close(); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(live.size) * 8)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					c, _, err := Open(fsys, dir)
					if err != nil {
						b.Fatal(err)
					}
					if err := c.Close(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkRingCRC is the ring CRC alone over a full 1M-slot ring, as Write
// computes it after copying the pages (os: from the mapping, pages resident;
// mem: ReadAt in 1 MiB chunks).
func BenchmarkRingCRC(b *testing.B) {
	for _, k := range fsKinds {
		b.Run(k.name, func(b *testing.B) {
			fsys, dir := newDir(b, k)
			c, err := Create(fsys, dir, benchCapacity)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			for s := 0; s < benchCapacity; s += pageSlots {
				c.SetSlot(s, 1)
			}
			c.Freeze()
			err = c.Write(&State{Meta: Meta{WriteOrderID: 1, Capacity: benchCapacity}})
			c.Thaw(err == nil)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(benchCapacity * 8)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := ringCRC(c.store, benchCapacity, 12345, benchCapacity); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
