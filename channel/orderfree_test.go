package channel

import (
	"testing"

	"github.com/flumego/filechannel/eventqueue"
)

// TestKeyOrderReusesReleasedLanes: a released lane comes back from newLane
// with its new owner and nothing parked (its parked events went back to
// the ring), and a released take list starts the next transaction's list
// empty; a lane that held a long run of parked events is not kept.
func TestKeyOrderReusesReleasedLanes(t *testing.T) {
	var o keyOrder
	o.init()
	l := o.newLane(7)
	l.parked = append(l.parked, eventqueue.Pointer(1), eventqueue.Pointer(2))
	o.freeLane(l)
	got := o.newLane(9)
	if got != l {
		t.Fatalf("newLane did not reuse the released lane")
	}
	if got.owner != 9 || len(got.parked) != 0 {
		t.Fatalf("reused lane: owner %d, parked %v; want 9 and none", got.owner, got.parked)
	}

	o.addTake(1, keyTake{key: 5, p: 3})
	o.addTake(1, keyTake{key: 6, p: 4})
	o.freeTakeList(o.byTx[1])
	delete(o.byTx, 1)
	o.addTake(2, keyTake{key: 8, p: 5})
	if takes := o.byTx[2]; len(takes) != 1 || takes[0].key != 8 {
		t.Fatalf("tx 2's takes %v; want only key 8", takes)
	}

	big := o.newLane(3)
	big.parked = make([]eventqueue.Pointer, maxFreeCap+1)
	o.freeLane(big)
	if n := len(o.freeLanes); n != 0 {
		t.Fatalf("a lane with %d parked slots was kept (%d free lanes)", maxFreeCap+1, n)
	}
}
