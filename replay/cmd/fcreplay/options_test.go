package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flumego/filechannel/channel"
)

// TestInspectTakeOptions: inspect shows each group's take options (text
// and JSON), stored by AddGroup, and tells the events a checkpoint lists
// in flight under the pseudo transactions waitingTx (waiting for a retry
// delay) and parkedTx (parked behind a held key) from taken ones.
func TestInspectTakeOptions(t *testing.T) {
	base := t.TempDir()
	f := &fixture{base: base, ckpt: filepath.Join(base, "checkpoint"), data: filepath.Join(base, "data")}
	c := mustOpen(t, f.config())
	for _, g := range []channel.GroupConfig{
		{Name: "o", OrderKey: "src", LeaseTimeout: time.Hour, ExpireAfter: 2 * time.Hour},
		{Name: "r", RetryDelays: []time.Duration{time.Hour, 90 * time.Minute}},
	} {
		if _, err := c.AddGroup(g); err != nil {
			t.Fatal(err)
		}
	}
	putN(t, c, 0, 4, 4) // every event's "src" is "test": one key
	o, err := c.Group("o")
	if err != nil {
		t.Fatal(err)
	}
	holder, _ := o.Begin()
	if _, ok, err := holder.Take(); !ok || err != nil {
		t.Fatalf("take: %v, %v", ok, err)
	}
	parker, _ := o.Begin()
	if _, ok, err := parker.Take(); ok || err != nil { // parks 1..3 behind the held key
		t.Fatalf("take past the held key: %v, %v", ok, err)
	}
	rollbackGroup(t, c, "r") // event 0 waits an hour
	mustClose(t, c)

	r := fcreplay(t, f.args("inspect", "--json")...)
	r.wantCode(t, exitOK)
	var out inspectJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	byName := map[string]groupJSON{}
	for _, g := range out.Groups {
		byName[g.Name] = g
	}
	og, rg := byName["o"], byName["r"]
	if og.OrderKey != "src" || og.LeaseTimeout != "1h0m0s" || og.ExpireAfter != "2h0m0s" || og.RetryDelays != nil ||
		og.InflightTakes != 1 || og.InflightParked != 3 || og.InflightWaiting != 0 {
		t.Errorf("group o: %+v", og)
	}
	if !slices.Equal(rg.RetryDelays, []string{"1h0m0s", "1h30m0s"}) || rg.OrderKey != "" || rg.LeaseTimeout != "" ||
		rg.InflightTakes != 0 || rg.InflightWaiting != 1 || rg.InflightParked != 0 {
		t.Errorf("group r: %+v", rg)
	}
	if out.InflightTakes != 1 || out.InflightWaiting != 1 || out.InflightParked != 3 {
		t.Errorf("in flight: %d taken, %d waiting, %d parked; want 1, 1, 3", out.InflightTakes, out.InflightWaiting, out.InflightParked)
	}
	r = fcreplay(t, f.args("inspect")...)
	r.wantCode(t, exitOK)
	for _, want := range []string{
		`group o: order key "src"; lease timeout 1h0m0s; expire after 2h0m0s`,
		"group o: 3 events listed in flight at the checkpoint as parkedTx (parked behind a held key, not taken)",
		"group r: retry delays 1h0m0s, 1h30m0s",
		"group r: 1 event listed in flight at the checkpoint as waitingTx (waiting for their retry delay, not taken)",
		"1 taken events at the checkpoint used (and 1 waiting for their retry delay, 3 parked behind a held key: not taken)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("inspect has no %q:\n%s", want, r.stdout)
		}
	}
	fcreplay(t, f.args("verify")...).wantCode(t, exitOK)
}
