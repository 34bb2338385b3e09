package dashboards_test

import (
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// waitP99 is the dashboard's first panel's query for the Obtains that
// acquired (those of the group that Redis never answers take seconds to
// fail, and would flatten the others), over a window short enough for the
// test's run of a few seconds.
const waitP99 = `histogram_quantile(0.99, sum by (locksmith_lock_group, le) (rate(locksmith_lock_acquire_duration_seconds_bucket{locksmith_lock_outcome="acquired"}[3s])))`

// drawWaitP99 draws the wait p99 by group from start to end, as Prometheus
// answers it, to *svgPath.
func drawWaitP99(t *testing.T, prom *server, start, end time.Time) {
	t.Helper()
	res, err := prom.api("/api/v1/query_range", url.Values{
		"query": {waitP99}, "start": {unix(start)}, "end": {unix(end)}, "step": {"0.5"},
	})
	if err != nil {
		t.Fatalf("query_range %s: %v", waitP99, err)
	}
	f, err := os.Create(*svgPath)
	if err != nil {
		t.Fatal(err)
	}
	chart(f, res, start, end)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", *svgPath)
}

func unix(t time.Time) string { return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64) }

// chart draws each series as a line: time from start to end across, the
// value in seconds up.
func chart(w io.Writer, res []series, start, end time.Time) {
	const width, height, left, right, top, bottom = 720.0, 320.0, 60.0, 130.0, 30.0, 40.0
	type point struct{ t, v float64 }
	lines := map[string][]point{}
	maxV := 0.0
	for _, s := range res {
		for _, tv := range s.Values {
			ts, _ := tv[0].(float64)
			str, _ := tv[1].(string)
			v, err := strconv.ParseFloat(str, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			g := s.Metric["locksmith_lock_group"]
			lines[g] = append(lines[g], point{ts - float64(start.UnixMilli())/1000, v})
			maxV = max(maxV, v)
		}
	}
	span := end.Sub(start).Seconds()
	top10 := math.Pow(10, math.Ceil(math.Log10(max(maxV, 0.001))))
	scaleV := top10
	for _, f := range []float64{0.2, 0.5} {
		if maxV <= top10*f {
			scaleV = top10 * f
		}
	}
	x := func(s float64) float64 { return left + s/span*(width-left-right) }
	y := func(v float64) float64 { return height - bottom - v/scaleV*(height-top-bottom) }
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(w, `<text x="%.0f" y="18" font-size="14">Wait p99 of the Obtains that acquired, by locksmith.lock.group (Prometheus, %.0fs windows)</text>`+"\n", left, 3.0)
	for i := 0; i <= 4; i++ {
		v := scaleV * float64(i) / 4
		fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n",
			left, width-right, y(v), y(v), left-6, y(v)+4, (time.Duration(v * float64(time.Second))).Round(time.Millisecond))
	}
	for s := 0.0; s <= span; s += 2 {
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">%.0fs</text>`+"\n", x(s), height-bottom+16, s)
	}
	fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">time since the run's start</text>`+"\n", x(span/2), height-6)
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd"}
	groups := slices.Sorted(func(yield func(string) bool) {
		for g := range lines {
			if !yield(g) {
				return
			}
		}
	})
	for i, g := range groups {
		c := colors[i%len(colors)]
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="2" points="`, c)
		for _, p := range lines[g] {
			fmt.Fprintf(w, "%.1f,%.1f ", x(p.t), y(p.v))
		}
		fmt.Fprintln(w, `"/>`)
		fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			width-right+10, width-right+30, top+20+float64(i)*18, top+20+float64(i)*18, c, width-right+35, top+24+float64(i)*18, g)
	}
	fmt.Fprintln(w, `</svg>`)
}
