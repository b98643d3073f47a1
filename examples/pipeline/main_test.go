package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestPipelineRunsAndResumes(t *testing.T) {
	dir := t.TempDir()
	o := options{dir: dir, events: 3000, duration: 20 * time.Second, batch: 100, size: 256}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("first run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "stopped cleanly") {
		t.Fatalf("output:\n%s", out.String())
	}
	first := loadState(dir + "/sink.next")
	if first < 3000 {
		t.Fatalf("sink delivered only up to #%d", first)
	}
	out.Reset()
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("second run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "sink expects #") || loadState(dir+"/sink.next") < first+3000 {
		t.Fatalf("second run did not resume:\n%s", out.String())
	}
	if strings.Contains(out.String(), "gaps 1") {
		t.Fatalf("gaps reported:\n%s", out.String())
	}
}
