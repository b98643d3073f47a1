package checkpoint

import (
	"testing"
	"time"
)

func TestReadRawHeader(t *testing.T) {
	const dir = "/cp"
	mem := newMem(t, dir)
	read := func() *RawHeader {
		t.Helper()
		h, err := ReadRawHeader(mem, dir)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if h := read(); h != nil {
		t.Fatalf("no checkpoint file: got %+v, want nil", h)
	}

	c := mustCreate(t, mem, dir, 8)
	h := read()
	if h == nil || !h.MagicOK() || h.Version != 1 || h.Capacity != 8 || h.MarkerName() != "INCOMPLETE" || !h.Time.IsZero() {
		t.Fatalf("after Create: %+v", h)
	}

	when := time.Unix(0, 1_700_000_000_123_000_000)
	commit(t, c, &State{Meta: Meta{WriteOrderID: 42, Capacity: 8, Head: 3, Time: when}})
	want := RawHeader{Magic: 0x46434350, Version: 1, WriteOrderID: 42, Head: 3, Marker: markerComplete, Capacity: 8, Time: when}
	if h := read(); h == nil || *h != want || h.MarkerName() != "COMPLETE" {
		t.Fatalf("after Write: %+v, want %+v", h, want)
	}

	// Damage is reported as stored, not refused.
	name := path(dir, CheckpointName)
	patch(t, mem, name, slotMagic*8, be64(0x58585858_00000007))
	patch(t, mem, name, slotMarker*8, be64(0x1234))
	h = read()
	if h == nil || h.MagicOK() || h.Version != 7 || h.Marker != 0x1234 || h.MarkerName() != "" || h.WriteOrderID != 42 {
		t.Fatalf("damaged header: %+v", h)
	}

	f, err := mem.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(rawHeaderLen - 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if h := read(); h != nil {
		t.Fatalf("file shorter than the header: got %+v, want nil", h)
	}
}
