package main

import (
	"fmt"
	"math"
	"strings"
)

// chart draws two panels as a hand-written SVG: events/s against batch size
// (log-log: filechannel puts, the disk's write+fdatasync and overwrite
// baselines, and the peers), and
// against the number of producers at batch 10.
func chart(r *Report) string {
	var s strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&s, format+"\n", args...) }
	w(`<svg xmlns="http://www.w3.org/2000/svg" width="820" height="360" font-family="sans-serif" font-size="12">`)
	w(`<rect width="820" height="360" fill="white"/>`)
	w(`<text x="410" y="18" text-anchor="middle" font-size="14">filechannel durable puts of 1 KiB events, %s (%s mode)</text>`, r.Env.Date, r.Mode)

	// Left panel: batch size, log-log.
	const x0, y0, pw, ph = 70.0, 40.0, 320.0, 260.0
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range r.Results {
		if x.Op == "put commit" || strings.HasPrefix(x.Op, "write") || strings.HasPrefix(x.Op, "pwrite") || strings.HasPrefix(x.Op, "put,") || x.Op == "sync write batch" {
			lo, hi = min(lo, x.EventsPerSec), max(hi, x.EventsPerSec)
		}
	}
	dlo, dhi := math.Floor(math.Log10(max(lo, 1))), math.Ceil(math.Log10(max(hi, 10)))
	px := func(batch int) float64 { return x0 + math.Log10(float64(batch))/3*pw }
	py := func(v float64) float64 { return y0 + ph - (math.Log10(max(v, 1))-dlo)/(dhi-dlo)*ph }
	axes(w, x0, y0, pw, ph, "batch size (events per commit)", "events/s")
	for _, b := range batches {
		w(`<text x="%.0f" y="%.0f" text-anchor="middle">%d</text>`, px(b), y0+ph+16, b)
	}
	for d := dlo; d <= dhi; d++ {
		w(`<text x="%.0f" y="%.0f" text-anchor="end">%s</text><line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="#ddd"/>`,
			x0-4, py(math.Pow(10, d))+4, si(math.Pow(10, d)), x0, x0+pw, py(math.Pow(10, d)), py(math.Pow(10, d)))
	}
	series := []struct{ op, label, color string }{
		{"write+fdatasync", "disk: write+fdatasync", "#888"},
		{"pwrite+fdatasync, overwrite", "disk: pwrite+fdatasync into a written file", "#b0b0b0"},
		{"put commit", "filechannel put", "#1f5fbf"},
		{"put, SyncEvery", "go-diskqueue put (returns before fsync)", "#d97a00"},
		{"sync write batch", "goleveldb sync batch", "#2a9d3a"},
	}
	for i, se := range series {
		var pts []string
		for _, x := range r.Results {
			if strings.HasPrefix(x.Op, se.op) && x.Batch > 0 && !strings.Contains(x.ID, "producers") {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(x.Batch), py(x.EventsPerSec)))
				w(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`, px(x.Batch), py(x.EventsPerSec), se.color)
			}
		}
		w(`<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`, strings.Join(pts, " "), se.color)
		w(`<rect x="%.0f" y="%.0f" width="10" height="10" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`,
			x0+8, y0+6+float64(i)*16, se.color, x0+22, y0+15+float64(i)*16, se.label)
	}

	// Right panel: producers at batch 10, linear.
	const x1 = 480.0
	var top float64
	var prod []Result
	for _, x := range r.Results {
		if x.System == "filechannel" && x.Batch == 10 && x.Producers > 0 && strings.Contains(x.ID, "producers") {
			prod = append(prod, x)
			top = max(top, x.EventsPerSec)
		}
	}
	disk10, ok := r.result("disk/write+fdatasync/batch=10/beside-producers")
	if !ok {
		disk10, _ = r.result("disk/write+fdatasync/batch=10")
	}
	step := niceStep(max(top, disk10.EventsPerSec) / 4)
	top = 4 * step
	qx := func(p int) float64 { return x1 + float64(p-1)/7*pw }
	qy := func(v float64) float64 { return y0 + ph - v/max(top, 1)*ph }
	axes(w, x1, y0, pw, ph, "producers (batch 10 each)", "events/s")
	for _, p := range []int{1, 2, 4, 8} {
		w(`<text x="%.0f" y="%.0f" text-anchor="middle">%d</text>`, qx(p), y0+ph+16, p)
	}
	for i := 0; i <= 4; i++ {
		v := step * float64(i)
		w(`<text x="%.0f" y="%.0f" text-anchor="end">%s</text>`, x1-4, qy(v)+4, si(v))
	}
	var pts []string
	for _, x := range prod {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", qx(x.Producers), qy(x.EventsPerSec)))
		w(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="#1f5fbf"/>`, qx(x.Producers), qy(x.EventsPerSec))
	}
	w(`<polyline points="%s" fill="none" stroke="#1f5fbf" stroke-width="2"/>`, strings.Join(pts, " "))
	w(`<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="5,4" stroke-width="2"/>`,
		x1, x1+pw, qy(disk10.EventsPerSec), qy(disk10.EventsPerSec))
	w(`<text x="%.0f" y="%.1f" fill="#555">disk: one write+fdatasync stream, batch 10</text>`, x1+6, qy(disk10.EventsPerSec)-5)
	w(`</svg>`)
	return s.String()
}

func axes(w func(string, ...any), x, y, pw, ph float64, xlabel, ylabel string) {
	w(`<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`, x, y+ph, x+pw, y+ph)
	w(`<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`, x, y, x, y+ph)
	w(`<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`, x+pw/2, y+ph+34, xlabel)
	w(`<text transform="translate(%.0f,%.0f) rotate(-90)" text-anchor="middle">%s</text>`, x-52, y+ph/2, ylabel)
}

// si formats v with a k or M suffix.
func si(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// niceStep rounds v up to 1, 2, 2.5 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
