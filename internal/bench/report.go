package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// ReportVersion is the version of the JSON report's layout (see the package doc).
const ReportVersion = 1

// Report is a bench run's result; its JSON keys are documented in the package doc.
type Report struct {
	Version       int               `json:"version"`
	Command       string            `json:"command,omitempty"`
	StartedAt     string            `json:"started_at"`
	ElapsedS      float64           `json:"elapsed_s"`
	Mode          string            `json:"mode"`
	RealtimeSpeed string            `json:"realtime_speed,omitempty"`
	Machine       Machine           `json:"machine"`
	Server        ServerInfo        `json:"server"`
	Workload      Workload          `json:"workload"`
	Transports    []TransportReport `json:"transports"`
	Events        Events            `json:"events"`
}

// Machine describes where the bench ran.
type Machine struct {
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go_version"`
}

// ServerInfo describes the server under test.
type ServerInfo struct {
	URL         string `json:"url"`
	Spawned     bool   `json:"spawned"`
	PID         int    `json:"pid,omitempty"`
	CPUMeasured bool   `json:"cpu_measured"`
	ClockTicks  int    `json:"clock_ticks_per_s"`
	GOMAXPROCS  int    `json:"gomaxprocs,omitempty"` // the spawned server's, when -cpus set it
	Engine      string `json:"engine,omitempty"`     // the engine transport's /v1 base URL
}

// Workload is what every transport ran.
type Workload struct {
	Rollouts         int `json:"rollouts"`
	Calls            int `json:"calls"`
	Turns            int `json:"turns"`
	ToolOutputBytes  int `json:"tool_output_bytes"`
	WarmupCalls      int `json:"warmup_calls"`
	HistoryTokensEnd int `json:"history_tokens_end"`
	// Model is the model of every request; MaxOutputTokens bounds each turn in engine mode.
	Model           string `json:"model,omitempty"`
	MaxOutputTokens int    `json:"max_output_tokens,omitempty"`
}

// Stats summarise per-turn values over every measured turn.
type Stats struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

// Growth compares the median overhead of the last turns with that of the first turns.
type Growth struct {
	Window  int     `json:"window_turns"`
	FirstMS float64 `json:"first_ms"`
	LastMS  float64 `json:"last_ms"`
	Ratio   float64 `json:"ratio"`
}

// E2E is a rollout's end-to-end time at one speed preset.
type E2E struct {
	Measured             bool    `json:"measured"`
	RolloutS             float64 `json:"rollout_s"`
	OverheadS            float64 `json:"overhead_s"`
	ModelS               float64 `json:"model_s"`
	RatioVsHTTP          float64 `json:"ratio_vs_http"`
	PrefixCachedRolloutS float64 `json:"prefix_cached_rollout_s,omitempty"`
	PrefixCachedRatio    float64 `json:"prefix_cached_ratio_vs_http,omitempty"`
	TTFTP50MS            float64 `json:"ttft_p50_ms"`
	TTFTRatioVsHTTP      float64 `json:"ttft_ratio_vs_http"`
	PrefixCachedTTFTMS   float64 `json:"prefix_cached_ttft_p50_ms,omitempty"`
	PrefixCachedTTFTRat  float64 `json:"prefix_cached_ttft_ratio_vs_http,omitempty"`
}

// TransportReport is one transport's result.
type TransportReport struct {
	Name               string         `json:"name"`
	Turns              int            `json:"turns"`
	OverheadMS         Stats          `json:"overhead_ms"`
	OverheadRatio      float64        `json:"overhead_ratio_vs_http"`
	FloorMS            Stats          `json:"floor_ms"`
	FloorEchoMS        Stats          `json:"floor_echo_ms"`
	FloorTokenizeMS    Stats          `json:"floor_tokenize_ms"`
	OverheadVsFloor    float64        `json:"overhead_vs_floor"`
	OwnCostMS          Stats          `json:"own_cost_ms"`
	BytesPerTurn       float64        `json:"bytes_per_turn"`
	FrameBytesPerTurn  float64        `json:"frame_bytes_per_turn"`
	ServerCPUMSPerTurn float64        `json:"server_cpu_ms_per_turn"`
	Growth             Growth         `json:"growth"`
	E2E                map[string]E2E `json:"e2e"`
	PerTurn            []TurnSample   `json:"per_turn"`

	// Engine mode: measured turn times and the engine's token counts (package doc).
	TurnMS               *Stats  `json:"turn_ms,omitempty"`
	RolloutS             float64 `json:"rollout_s,omitempty"`     // mean over rollouts of Σ turn times
	RolloutRatio         float64 `json:"rollout_ratio,omitempty"` // RolloutS / the baseline's (engine, else http)
	InputTokensPerTurn   float64 `json:"input_tokens_per_turn,omitempty"`
	PrefillTokensPerTurn float64 `json:"prefill_tokens_per_turn,omitempty"`
	CachedTokensPerTurn  float64 `json:"cached_tokens_per_turn,omitempty"`
	CachedFraction       float64 `json:"cached_fraction,omitempty"` // Σ cached / Σ input over every turn
	ToolCallTurns        int     `json:"tool_call_turns,omitempty"` // turns that ended at tool calls
}

// TurnSample is one measured turn.
type TurnSample struct {
	Rollout         int     `json:"rollout"`
	Turn            int     `json:"turn"`
	OverheadMS      float64 `json:"overhead_ms"`
	TurnMS          float64 `json:"turn_ms"`
	FloorMS         float64 `json:"floor_ms"`
	FloorEchoMS     float64 `json:"floor_echo_ms"`
	FloorTokenizeMS float64 `json:"floor_tokenize_ms"`
	FrameBytes      int     `json:"frame_bytes"`
	BytesSent       int64   `json:"bytes_sent"`
	ServerCPUMS     float64 `json:"server_cpu_ms"`
	InputTokens     int     `json:"input_tokens"`
	CachedTokens    int     `json:"cached_tokens"`
	PrefillTokens   int     `json:"prefill_tokens"`
	OutputTokens    int     `json:"output_tokens"`
	NewInputTokens  int     `json:"new_input_tokens"`
	Events          int     `json:"events"`
	ToolCalls       int     `json:"tool_calls,omitempty"` // engine mode: calls the turn ended at (answered next turn)
}

// Events holds the streaming throughput measurements.
type Events struct {
	Single     *EventsResult `json:"single"`
	Concurrent *EventsResult `json:"concurrent"`
	Turns      *TurnsResult  `json:"turns,omitempty"` // aggregate turns/s of Concurrent rollouts
}

// EventsResult is one streaming throughput measurement.
type EventsResult struct {
	Rollouts            int     `json:"rollouts"`
	AnswerTokens        int     `json:"answer_tokens"`
	Events              int     `json:"events"`
	Seconds             float64 `json:"seconds"`
	EventsPerS          float64 `json:"events_per_s"`
	ServerCPUS          float64 `json:"server_cpu_s"`
	ServerCPUUSPerEvent float64 `json:"server_cpu_us_per_event,omitempty"`
}

func stats(v []float64) Stats {
	if len(v) == 0 {
		return Stats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return Stats{P50: quantile(s, 0.5), P90: quantile(s, 0.9), Mean: sum / float64(len(s)), Min: s[0], Max: s[len(s)-1]}
}

// quantile of sorted s, linear between the closest ranks.
func quantile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (s[i+1]-s[i])*(pos-float64(i))
}

func median(v []float64) float64 { return stats(v).P50 }

// growthWindow is the number of turns at each end that the growth ratio takes the median of:
// one in twenty turns, at least three (at most half the turns, at least one). The growth ratio
// takes, for each turn, the fastest of the rollouts (see the package doc).
func growthWindow(turns int) int { return max(1, min(turns/2, max(3, turns/20))) }

func summarize(name string, samples []TurnSample, cpu time.Duration, cpuOK bool, cfg Config, engine bool) TransportReport {
	tr := TransportReport{Name: name, Turns: len(samples), PerTurn: samples, ServerCPUMSPerTurn: -1, E2E: map[string]E2E{}}
	pick := func(f func(*TurnSample) float64) []float64 {
		out := make([]float64, len(samples))
		for i := range samples {
			out[i] = f(&samples[i])
		}
		return out
	}
	tr.OverheadMS = stats(pick(func(s *TurnSample) float64 { return s.OverheadMS }))
	tr.FloorMS = stats(pick(func(s *TurnSample) float64 { return s.FloorMS }))
	tr.FloorEchoMS = stats(pick(func(s *TurnSample) float64 { return s.FloorEchoMS }))
	tr.FloorTokenizeMS = stats(pick(func(s *TurnSample) float64 { return s.FloorTokenizeMS }))
	if tr.FloorMS.P50 > 0 {
		tr.OverheadVsFloor = tr.OverheadMS.P50 / tr.FloorMS.P50
	}
	tr.OwnCostMS = stats(pick(func(s *TurnSample) float64 { return s.OverheadMS - s.FloorMS }))
	tr.BytesPerTurn = stats(pick(func(s *TurnSample) float64 { return float64(s.BytesSent) })).Mean
	tr.FrameBytesPerTurn = stats(pick(func(s *TurnSample) float64 { return float64(s.FrameBytes) })).Mean
	if cpuOK && len(samples) > 0 {
		tr.ServerCPUMSPerTurn = ms(cpu) / float64(len(samples))
	}

	turns := cfg.Calls + 1
	w := growthWindow(turns)
	best := perTurn(samples, turns, func(s *TurnSample) float64 { return s.OverheadMS }, minOf)
	first, last := best[:w], best[turns-w:]
	tr.Growth = Growth{Window: w, FirstMS: median(first), LastMS: median(last)}
	if tr.Growth.FirstMS > 0 {
		tr.Growth.Ratio = tr.Growth.LastMS / tr.Growth.FirstMS
	}

	rollouts := float64(cfg.Rollouts)
	if engine {
		turnMS := stats(pick(func(s *TurnSample) float64 { return s.TurnMS }))
		tr.TurnMS = &turnMS
		var in, cached, prefill int
		for _, s := range samples {
			tr.RolloutS += s.TurnMS / 1000
			in, cached, prefill = in+s.InputTokens, cached+s.CachedTokens, prefill+s.PrefillTokens
			if s.ToolCalls > 0 {
				tr.ToolCallTurns++
			}
		}
		tr.RolloutS /= rollouts
		if n := float64(len(samples)); n > 0 {
			tr.InputTokensPerTurn, tr.CachedTokensPerTurn, tr.PrefillTokensPerTurn = float64(in)/n, float64(cached)/n, float64(prefill)/n
		}
		if in > 0 {
			tr.CachedFraction = float64(cached) / float64(in)
		}
		return tr
	}
	if cfg.Realtime {
		var e E2E
		e.Measured = true
		for _, s := range samples {
			e.RolloutS += s.TurnMS / 1000
		}
		e.RolloutS /= rollouts
		e.TTFTP50MS = tr.OverheadMS.P50
		tr.E2E[cfg.RealtimeSpeed.String()] = e
		return tr
	}
	for _, p := range Presets {
		cost := p.Cost()
		var e E2E
		var ttft, ttftCached []float64
		for _, s := range samples {
			over := time.Duration(s.OverheadMS * float64(time.Millisecond))
			model := cost.Duration(s.PrefillTokens, s.OutputTokens)
			modelCached := cost.Duration(s.NewInputTokens, s.OutputTokens)
			e.OverheadS += over.Seconds()
			e.ModelS += model.Seconds()
			e.RolloutS += (over + model).Seconds()
			e.PrefixCachedRolloutS += (over + modelCached).Seconds()
			ttft = append(ttft, ms(over+cost.Duration(s.PrefillTokens, 0)))
			ttftCached = append(ttftCached, ms(over+cost.Duration(s.NewInputTokens, 0)))
		}
		e.OverheadS /= rollouts
		e.ModelS /= rollouts
		e.RolloutS /= rollouts
		e.PrefixCachedRolloutS /= rollouts
		e.TTFTP50MS = median(ttft)
		e.PrefixCachedTTFTMS = median(ttftCached)
		tr.E2E[p.String()] = e
	}
	return tr
}

// finishRatios sets the ratios against the baseline (the engine transport when it ran, else
// http) and the history size.
func finishRatios(rep *Report) {
	var base *TransportReport
	for i := range rep.Transports {
		if rep.Transports[i].Name == HTTP && base == nil || rep.Transports[i].Name == Engine {
			base = &rep.Transports[i]
		}
	}
	for i := range rep.Transports {
		t := &rep.Transports[i]
		for _, s := range t.PerTurn {
			if s.Turn == rep.Workload.Turns {
				rep.Workload.HistoryTokensEnd = max(rep.Workload.HistoryTokensEnd, s.InputTokens)
			}
		}
		if base == nil {
			continue
		}
		t.OverheadRatio = ratio(t.OverheadMS.P50, base.OverheadMS.P50)
		t.RolloutRatio = ratio(t.RolloutS, base.RolloutS)
		for k, e := range t.E2E {
			b := base.E2E[k]
			e.RatioVsHTTP = ratio(e.RolloutS, b.RolloutS)
			e.PrefixCachedRatio = ratio(e.PrefixCachedRolloutS, b.PrefixCachedRolloutS)
			e.TTFTRatioVsHTTP = ratio(e.TTFTP50MS, b.TTFTP50MS)
			e.PrefixCachedTTFTRat = ratio(e.PrefixCachedTTFTMS, b.PrefixCachedTTFTMS)
			t.E2E[k] = e
		}
	}
}

func ratio(a, b float64) float64 {
	if b <= 0 || math.IsNaN(a) {
		return 0
	}
	return a / b
}

// WriteJSON writes the report as indented JSON to path.
func (r *Report) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// speedKeys returns the e2e keys in preset order.
func (r *Report) speedKeys() []string {
	if r.Mode == "realtime" {
		return []string{r.RealtimeSpeed}
	}
	var ks []string
	for _, p := range Presets {
		ks = append(ks, p.String())
	}
	return ks
}

// table is a simple table rendered as aligned text or as Markdown.
type table struct {
	head []string
	rows [][]string
	left int // leading columns aligned left (at least the first)
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer, markdown bool) {
	width := make([]int, len(t.head))
	for _, row := range append([][]string{t.head}, t.rows...) {
		for i, c := range row {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	line := func(row []string) {
		for i, c := range row {
			pad := width[i] - len([]rune(c))
			if markdown {
				fmt.Fprint(w, "| ")
			} else if i > 0 {
				fmt.Fprint(w, "  ")
			}
			if i < max(t.left, 1) {
				fmt.Fprint(w, c, spaces(pad))
			} else {
				fmt.Fprint(w, spaces(pad), c)
			}
			if markdown {
				fmt.Fprint(w, " ")
			}
		}
		if markdown {
			fmt.Fprint(w, "|")
		}
		fmt.Fprintln(w)
	}
	line(t.head)
	if markdown {
		for i := range t.head {
			if i < max(t.left, 1) {
				fmt.Fprint(w, "| :", dashes(width[i]-1), " ")
			} else {
				fmt.Fprint(w, "| ", dashes(width[i]-1), ": ")
			}
		}
		fmt.Fprintln(w, "|")
	}
	for _, r := range t.rows {
		line(r)
	}
}

func spaces(n int) string { return repeat(' ', n) }
func dashes(n int) string { return repeat('-', n) }
func repeat(c byte, n int) string {
	if n <= 0 {
		return ""
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

// fmtOwn formats a transport's own cost per turn, which can be below zero when the floor
// measured after a turn was slower than the turn (a shared machine).
func fmtOwn(v float64) string {
	if v < 0 {
		return "−" + fmtMS(-v)
	}
	return fmtMS(v)
}

// fmtMS formats a duration given in milliseconds with three significant digits.
func fmtMS(v float64) string {
	switch {
	case v < 0:
		return "n/a"
	case v == 0:
		return "0"
	case v < 1:
		return sig3(v*1000) + "µs"
	case v < 1000:
		return sig3(v) + "ms"
	}
	return sig3(v/1000) + "s"
}

func fmtS(v float64) string { return fmtMS(v * 1000) }

func sig3(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func fmtBytes(v float64) string {
	switch {
	case v >= 1<<20:
		return sig3(v/(1<<20)) + " MiB"
	case v >= 1<<10:
		return sig3(v/(1<<10)) + " KiB"
	}
	return fmt.Sprintf("%.0f B", v)
}

func fmtRatio(v float64) string {
	switch {
	case v <= 0:
		return "–"
	case v < 0.1:
		return fmt.Sprintf("%.3f×", v)
	}
	return sig3(v) + "×"
}

// WriteTable writes the human summary: the overhead table, the end-to-end table and the
// events/s line. markdown selects Markdown tables (for docs) instead of aligned text.
func (r *Report) WriteTable(w io.Writer, markdown bool) {
	if r.Mode == "engine" {
		r.writeEngineTable(w, markdown)
		return
	}
	wl := r.Workload
	srv := "server " + r.Server.URL
	if r.Server.Spawned {
		srv = fmt.Sprintf("spawned server (pid %d)", r.Server.PID)
	}
	speed := "sim at instant speed"
	if r.Mode == "realtime" {
		speed = "sim in real time at " + r.RealtimeSpeed + " tokens/s"
	}
	fmt.Fprintf(w, "tether bench: %d rollout(s) × %d tool calls (%d turns) per transport, tool output %s, "+
		"%d tokens of history at the last turn; %s, %s; %d CPUs, %s.\n\n",
		wl.Rollouts, wl.Calls, wl.Turns, fmtBytes(float64(wl.ToolOutputBytes)), wl.HistoryTokensEnd, srv, speed,
		r.Machine.CPUs, r.Machine.GoVersion)

	over := "overhead"
	if r.Mode == "realtime" {
		over = "first item"
	}
	t := table{head: []string{"transport", over + " p50", "p90", "×http", "floor p50", "×floor", "own cost p50", "bytes/turn", "server CPU/turn", fmt.Sprintf("growth (last/first %d)", growthWindow(wl.Turns))}}
	for _, tr := range r.Transports {
		cpu := "n/a"
		if tr.ServerCPUMSPerTurn >= 0 {
			cpu = fmtMS(tr.ServerCPUMSPerTurn)
		}
		t.add(tr.Name, fmtMS(tr.OverheadMS.P50), fmtMS(tr.OverheadMS.P90), fmtRatio(tr.OverheadRatio),
			fmtMS(tr.FloorMS.P50), fmtRatio(tr.OverheadVsFloor), fmtOwn(tr.OwnCostMS.P50), fmtBytes(tr.BytesPerTurn), cpu, fmtRatio(tr.Growth.Ratio))
	}
	t.write(w, markdown)
	fmt.Fprintln(w)
	if n := len(r.Transports); n > 0 {
		last := &r.Transports[n-1] // the smallest frame that carries the new input
		fmt.Fprintf(w, "floor = loopback WebSocket echo of the same frame + one tokenization of the new input "+
			"(the %s frame: echo p50 %s, tokenize p50 %s).\n\n", last.Name, fmtMS(last.FloorEchoMS.P50), fmtMS(last.FloorTokenizeMS.P50))
	}

	keys := r.speedKeys()
	if r.Mode == "realtime" {
		e := table{head: []string{"transport", "rollout @" + keys[0] + " tok/s (measured)", "×http", "first item p50"}}
		for _, tr := range r.Transports {
			x := tr.E2E[keys[0]]
			e.add(tr.Name, fmtS(x.RolloutS), fmtRatio(x.RatioVsHTTP), fmtMS(x.TTFTP50MS))
		}
		e.write(w, markdown)
		fmt.Fprintln(w)
	} else {
		fmt.Fprintln(w, "end-to-end rollout time = Σ over turns of (measured overhead + the sim cost model's time for the turn's")
		fmt.Fprintln(w, "prefill and output tokens); TTFT = median over turns of (overhead + time to first token + prefill).")
		fmt.Fprintln(w, "\"as served\": prefill = input_tokens − cached_tokens as the server reported them; \"prefix cache\": every")
		fmt.Fprintln(w, "transport given a perfect prefix cache (prefill = the new input's tokens only), which leaves the transport's own cost.")
		fmt.Fprintln(w)
		e := table{head: []string{"preset", "transport", "rollout as served", "×http", "TTFT p50", "×http",
			"rollout, prefix cache", "×http", "TTFT p50", "×http"}, left: 2}
		for _, k := range keys {
			for _, tr := range r.Transports {
				x := tr.E2E[k]
				e.add(k+" tok/s", tr.Name, fmtS(x.RolloutS), fmtRatio(x.RatioVsHTTP), fmtMS(x.TTFTP50MS), fmtRatio(x.TTFTRatioVsHTTP),
					fmtS(x.PrefixCachedRolloutS), fmtRatio(x.PrefixCachedRatio), fmtMS(x.PrefixCachedTTFTMS), fmtRatio(x.PrefixCachedTTFTRat))
			}
		}
		e.write(w, markdown)
		fmt.Fprintln(w)
	}
	if s := r.Events.Single; s != nil {
		fmt.Fprintf(w, "events/s, one rollout: %s (%d events in %s", fmtRate(s.EventsPerS), s.Events, fmtS(s.Seconds))
		if s.ServerCPUUSPerEvent > 0 {
			fmt.Fprintf(w, ", server CPU %.2fµs/event", s.ServerCPUUSPerEvent)
		}
		fmt.Fprintln(w, ")")
	}
	if s := r.Events.Concurrent; s != nil {
		fmt.Fprintf(w, "events/s, %d concurrent rollouts: %s aggregate (%d events in %s", s.Rollouts, fmtRate(s.EventsPerS), s.Events, fmtS(s.Seconds))
		if s.ServerCPUUSPerEvent > 0 {
			fmt.Fprintf(w, ", server CPU %.2fµs/event", s.ServerCPUUSPerEvent)
		}
		fmt.Fprintln(w, ")")
	}
	if s := r.Events.Turns; s != nil {
		fmt.Fprintf(w, "turns/s, %d concurrent rollouts of %d calls: %s aggregate (%d turns in %s", s.Rollouts, s.Calls, fmtRate(s.TurnsPerS), s.Turns, fmtS(s.Seconds))
		if s.ServerCPUUSPerTurn > 0 {
			fmt.Fprintf(w, ", server CPU %.1fµs/turn", s.ServerCPUUSPerTurn)
		}
		fmt.Fprintln(w, ")")
	}
	if r.Server.GOMAXPROCS > 0 {
		fmt.Fprintf(w, "server GOMAXPROCS %d (-cpus) on a %d-CPU machine\n", r.Server.GOMAXPROCS, r.Machine.CPUs)
	}
}

func fmtRate(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	// thousands separators
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func (r *Report) transport(name string) *TransportReport {
	for i := range r.Transports {
		if r.Transports[i].Name == name {
			return &r.Transports[i]
		}
	}
	return &TransportReport{}
}

// WriteMarkdown writes the tables (WriteTable with Markdown tables) to path, under a heading
// that names the command and the time of the run.
func (r *Report) WriteMarkdown(path string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# tether bench\n\n")
	if r.Command != "" {
		fmt.Fprintf(&b, "`%s`, ", r.Command)
	}
	fmt.Fprintf(&b, "run %s (%.0fs).\n\n", r.StartedAt, r.ElapsedS)
	r.WriteTable(&b, true)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
