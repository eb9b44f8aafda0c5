package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// colors of the transports in the chart, and the floor's.
var colors = map[string]string{HTTP: "#d62728", HTTPPrev: "#ff7f0e", WS: "#1f77b4", Append: "#2ca02c"}

const floorColor = "#7f7f7f"

// series is one line of the chart: a value per turn index (NaN where there is none).
type series struct {
	name   string
	color  string
	dashed bool
	v      []float64 // v[i] is turn i+1
}

// perTurn returns, for each turn index 1..turns, agg of f over the rollouts' samples of that
// turn (NaN where there is none).
func perTurn(samples []TurnSample, turns int, f func(*TurnSample) float64, agg func([]float64) float64) []float64 {
	by := make([][]float64, turns)
	for i := range samples {
		s := &samples[i]
		if s.Turn >= 1 && s.Turn <= turns {
			by[s.Turn-1] = append(by[s.Turn-1], f(s))
		}
	}
	out := make([]float64, turns)
	for i, v := range by {
		if len(v) == 0 {
			out[i] = math.NaN()
			continue
		}
		out[i] = agg(v)
	}
	return out
}

// minOf is the smallest of v: of R rollouts, the one least disturbed by other work on the
// machine. Costs that recur in every rollout at the same turn (a GC cycle at a given heap size)
// stay in it.
func minOf(v []float64) float64 { return slices.Min(v) }

// WriteSVG writes the chart (overhead per turn against the turn index, one line per
// transport, log-scale y) to path.
func (r *Report) WriteSVG(path string) error {
	var b strings.Builder
	r.svg(&b)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// SVG returns the chart that WriteSVG writes, as a standalone SVG document.
func (r *Report) SVG() string {
	var b strings.Builder
	r.svg(&b)
	return b.String()
}

func (r *Report) svg(w io.Writer) {
	turns := r.Workload.Turns
	var ss []series
	for _, t := range r.Transports {
		ss = append(ss, series{name: t.Name, color: colors[t.Name],
			v: perTurn(t.PerTurn, turns, func(s *TurnSample) float64 { return s.OverheadMS }, minOf)})
	}
	// The floor of the smallest frame that carries the new input: the append frame when it ran.
	if n := len(r.Transports); n > 0 {
		t := r.Transports[n-1]
		ss = append(ss, series{name: "floor (" + t.Name + " frame)", color: floorColor, dashed: true,
			v: perTurn(t.PerTurn, turns, func(s *TurnSample) float64 { return s.FloorMS }, minOf)})
	}

	const (
		W, H                   = 960, 560
		left, right, top, bott = 78, 236, 84, 62
	)
	pw, ph := float64(W-left-right), float64(H-top-bott)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, v := range s.v {
			if v > 0 && !math.IsNaN(v) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0.01, 1
	}
	ylo := math.Pow(10, math.Floor(math.Log10(lo)))
	yhi := math.Pow(10, math.Ceil(math.Log10(hi)))
	if yhi <= ylo {
		yhi = ylo * 10
	}
	xOf := func(turn int) float64 {
		if turns <= 1 {
			return float64(left)
		}
		return float64(left) + pw*float64(turn-1)/float64(turns-1)
	}
	yOf := func(v float64) float64 {
		return float64(top) + ph*(1-(math.Log10(v)-math.Log10(ylo))/(math.Log10(yhi)-math.Log10(ylo)))
	}

	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="13">`+"\n", W, H, W, H)
	fmt.Fprintf(w, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", W, H)
	title := "Per-turn overhead by transport"
	mode := "sim at instant speed: overhead = first byte sent → first response.output_item.added"
	if r.Mode == "realtime" {
		mode = "sim in real time at " + r.RealtimeSpeed + " tokens/s: first byte sent → first response.output_item.added"
	}
	fmt.Fprintf(w, `<text x="%d" y="28" font-size="18" font-weight="bold">%s</text>`+"\n", left, esc(title))
	fmt.Fprintf(w, `<text x="%d" y="50" fill="#444">%s</text>`+"\n", left, esc(mode))
	fmt.Fprintf(w, `<text x="%d" y="68" fill="#444">%d rollout(s) × %d tool calls per transport, tool output %s, %d tokens of history at the last turn; %d CPUs</text>`+"\n",
		left, r.Workload.Rollouts, r.Workload.Calls, fmtBytes(float64(r.Workload.ToolOutputBytes)), r.Workload.HistoryTokensEnd, r.Machine.CPUs)

	// Grid and y labels: 1, 2, 5 × 10^k.
	for d := ylo; d < yhi*1.001; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := d * m
			if v > yhi*1.001 {
				break
			}
			y := yOf(v)
			stroke, sw := "#e6e6e6", 1.0
			if m == 1 {
				stroke, sw = "#c8c8c8", 1.0
			}
			fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-width="%.1f"/>`+"\n", left, y, W-right, y, stroke, sw)
			fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle" fill="#333">%s</text>`+"\n", left-8, y, esc(gridLabel(v)))
		}
	}
	// X ticks.
	step := niceStep(turns)
	for t := 1; t <= turns; {
		x := xOf(t)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#f0f0f0"/>`+"\n", x, top, x, H-bott)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333"/>`+"\n", x, H-bott, x, H-bott+5)
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle" fill="#333">%d</text>`+"\n", x, H-bott+20, t)
		if t == 1 && step > 1 {
			t = step
		} else {
			t += step
		}
	}
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#333"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle" fill="#333">turn of the rollout</text>`+"\n", float64(left)+pw/2, H-18)
	fmt.Fprintf(w, `<text transform="translate(20,%.1f) rotate(-90)" text-anchor="middle" fill="#333">overhead per turn (log scale)</text>`+"\n", float64(top)+ph/2)

	// Lines.
	for _, s := range ss {
		var pts []string
		for i, v := range s.v {
			if v > 0 && !math.IsNaN(v) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(i+1), yOf(v)))
			}
		}
		dash := ""
		width := 1.6
		if s.dashed {
			dash = ` stroke-dasharray="6 4"`
			width = 1.4
		}
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="%.1f" stroke-linejoin="round"%s points="%s"><title>%s</title></polyline>`+"\n",
			s.color, width, dash, strings.Join(pts, " "), esc(s.name))
	}

	// Legend: name and median overhead of the last turns.
	lx, ly := W-right+18, top+10
	for i, s := range ss {
		y := ly + i*44
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"%s/>`+"\n", lx, y, lx+24, y, s.color, dash)
		fmt.Fprintf(w, `<text x="%d" y="%d" dominant-baseline="middle" font-weight="bold">%s</text>`+"\n", lx+32, y, esc(s.name))
		if tr := r.transport(s.name); tr.Name != "" {
			fmt.Fprintf(w, `<text x="%d" y="%d" dominant-baseline="middle" fill="#555" font-size="12">%s → %s (%s)</text>`+"\n",
				lx+32, y+17, esc(fmtMS(tr.Growth.FirstMS)), esc(fmtMS(tr.Growth.LastMS)), esc(fmtRatio(tr.Growth.Ratio)))
		}
	}
	fmt.Fprintf(w, `<text x="%d" y="%d" fill="#555" font-size="11">median of the first %d turns →</text>`+"\n", lx, ly+len(ss)*44, growthWindow(turns))
	fmt.Fprintf(w, `<text x="%d" y="%d" fill="#555" font-size="11">median of the last %d (growth)</text>`+"\n", lx, ly+len(ss)*44+15, growthWindow(turns))
	if r.Workload.Rollouts > 1 {
		fmt.Fprintf(w, `<text x="%d" y="%d" fill="#555" font-size="11">each point: fastest of %d rollouts</text>`+"\n", lx, ly+len(ss)*44+30, r.Workload.Rollouts)
	}
	fmt.Fprintln(w, `</svg>`)
}

// gridLabel formats a 1-2-5 grid value given in milliseconds: 200µs, 1ms, 50ms, 2s.
func gridLabel(v float64) string {
	switch {
	case v < 0.001:
		return strconv.FormatFloat(v*1e6, 'g', 3, 64) + "ns"
	case v < 1:
		return strconv.FormatFloat(v*1000, 'g', 3, 64) + "µs"
	case v < 1000:
		return strconv.FormatFloat(v, 'g', 3, 64) + "ms"
	}
	return strconv.FormatFloat(v/1000, 'g', 3, 64) + "s"
}

// niceStep returns a tick step of 1, 2 or 5 × 10^k giving at most ten ticks.
func niceStep(n int) int {
	for _, base := range []int{1, 10, 100, 1000, 10000, 100000} {
		for _, m := range []int{1, 2, 5} {
			if n/(base*m) <= 10 {
				return base * m
			}
		}
	}
	return 1000000
}

func esc(s string) string { return html.EscapeString(s) }
