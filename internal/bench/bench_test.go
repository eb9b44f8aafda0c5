package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/internal/skipnote"
	"github.com/tetherd/tether/sampler/sim"
)

// childEnv makes the test binary act as a `tether serve` child for TestSpawn.
const childEnv = "BENCH_TEST_CHILD_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(childServe())
	}
	goleak.VerifyTestMain(skipnote.M(m, "internal/bench"))
}

// childServe is a minimal `tether serve`: it logs the listen address the way serve does and
// stops on SIGTERM.
func childServe() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s := server.New(server.Options{Logger: log})
	hs := &http.Server{Handler: s}
	go func() { _ = hs.Serve(ln) }()
	fmt.Fprintf(os.Stderr, "time=now level=INFO msg=\"tether listening\" addr=%s model=sim\n", ln.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.Shutdown(ctx)
	_ = hs.Shutdown(ctx)
	return 0
}

// inProcess starts server.New on httptest and returns its URL.
func inProcess(t *testing.T, opts server.Options) string {
	t.Helper()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	_, url := servertest.Start(t, opts)
	return url
}

func tiny(url string) Config {
	return Config{URL: url, Rollouts: 1, Calls: 3, ToolOutputBytes: 400, WarmupCalls: 1,
		StreamTokens: 300, Concurrent: 4, ConcurrentTokens: 40, Timeout: time.Minute}
}

// TestRunStructure runs a tiny bench against an in-process server and checks the report's
// structure and sanity (never its timings).
func TestRunStructure(t *testing.T) {
	cfg := tiny(inProcess(t, server.Options{}))
	cfg.PID = os.Getpid() // the in-process server's CPU is this process's
	var progress bytes.Buffer
	cfg.Progress = &progress
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, cfg, true)
	if !strings.Contains(progress.String(), "append") || !strings.HasSuffix(progress.String(), "\n") {
		t.Errorf("progress line: %q", progress.String())
	}

	// The append and ws transports resume the rollout: after turn 1 most of the context is
	// cached. http renders everything every turn.
	for _, name := range []string{WS, Append} {
		for _, s := range rep.transport(name).PerTurn[1:] {
			if s.CachedTokens == 0 || s.PrefillTokens >= s.InputTokens {
				t.Errorf("%s turn %d: cached %d of %d input tokens: the hot path did not run", name, s.Turn, s.CachedTokens, s.InputTokens)
			}
		}
	}
	for _, s := range rep.transport(HTTP).PerTurn {
		if s.CachedTokens != 0 {
			t.Errorf("http turn %d: cached_tokens %d, want 0", s.Turn, s.CachedTokens)
		}
	}
	// http sends the whole history, so its last turn's body is the largest of all.
	h, a := rep.transport(HTTP).PerTurn, rep.transport(Append).PerTurn
	if h[len(h)-1].FrameBytes <= h[0].FrameBytes || h[len(h)-1].FrameBytes <= a[len(a)-1].FrameBytes {
		t.Errorf("frame bytes: http first %d last %d, append last %d", h[0].FrameBytes, h[len(h)-1].FrameBytes, a[len(a)-1].FrameBytes)
	}

	dir := t.TempDir()
	jsonPath, svgPath, mdPath := filepath.Join(dir, "b.json"), filepath.Join(dir, "b.svg"), filepath.Join(dir, "b.md")
	if err := rep.WriteJSON(jsonPath); err != nil {
		t.Fatal(err)
	}
	checkJSON(t, jsonPath)
	if err := rep.WriteSVG(svgPath); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, svgPath, rep)
	if err := rep.WriteMarkdown(mdPath); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(mdPath)
	var table bytes.Buffer
	rep.WriteTable(&table, false)
	for _, name := range Transports {
		if !bytes.Contains(md, []byte("| "+name+" ")) {
			t.Errorf("markdown has no row for %s:\n%s", name, md)
		}
		if !strings.Contains(table.String(), "\n"+name+" ") {
			t.Errorf("table has no row for %s:\n%s", name, table.String())
		}
	}
	for _, want := range []string{"events/s, one rollout", "events/s, 4 concurrent rollouts", "1000 tok/s"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

func checkReport(t *testing.T, rep *Report, cfg Config, cpu bool) {
	t.Helper()
	if rep.Version != ReportVersion || rep.Mode != "instant" {
		t.Errorf("version %d mode %q", rep.Version, rep.Mode)
	}
	if rep.Workload.Turns != cfg.Calls+1 || rep.Workload.HistoryTokensEnd <= 0 {
		t.Errorf("workload %+v", rep.Workload)
	}
	if len(rep.Transports) != len(Transports) {
		t.Fatalf("%d transports, want %d", len(rep.Transports), len(Transports))
	}
	for i, tr := range rep.Transports {
		if tr.Name != Transports[i] {
			t.Errorf("transport %d is %q, want %q", i, tr.Name, Transports[i])
		}
		if len(tr.PerTurn) != cfg.Calls+1 || tr.Turns != cfg.Calls+1 {
			t.Errorf("%s: %d turns, want %d", tr.Name, len(tr.PerTurn), cfg.Calls+1)
		}
		for j, s := range tr.PerTurn {
			if s.Turn != j+1 || s.Rollout != 1 {
				t.Errorf("%s: sample %d is rollout %d turn %d", tr.Name, j, s.Rollout, s.Turn)
			}
			if s.OverheadMS <= 0 || s.TurnMS < s.OverheadMS || s.FloorEchoMS <= 0 || s.FloorTokenizeMS <= 0 ||
				s.FloorMS < s.FloorEchoMS || s.BytesSent <= int64(s.FrameBytes) || s.FrameBytes <= 0 {
				t.Errorf("%s turn %d: not positive or inconsistent: %+v", tr.Name, s.Turn, s)
			}
			if s.InputTokens <= 0 || s.OutputTokens <= 0 || s.NewInputTokens <= 0 || s.Events <= 0 {
				t.Errorf("%s turn %d: usage %+v", tr.Name, s.Turn, s)
			}
			if j > 0 && s.InputTokens <= tr.PerTurn[j-1].InputTokens {
				t.Errorf("%s turn %d: input_tokens %d did not grow", tr.Name, s.Turn, s.InputTokens)
			}
			if cpu && s.ServerCPUMS < 0 {
				t.Errorf("%s turn %d: no server CPU", tr.Name, s.Turn)
			}
		}
		if tr.OverheadMS.P50 <= 0 || tr.OverheadMS.P90 < tr.OverheadMS.P50 || tr.FloorMS.P50 <= 0 ||
			tr.OverheadVsFloor <= 0 || tr.BytesPerTurn <= 0 || tr.Growth.Ratio <= 0 || tr.OverheadRatio <= 0 {
			t.Errorf("%s: summary %+v", tr.Name, tr)
		}
		if own := tr.OwnCostMS; own.Max > tr.OverheadMS.Max || own.Min > tr.OverheadMS.Min || own.Min > own.P50 {
			t.Errorf("%s: own cost %+v not under the overhead %+v", tr.Name, own, tr.OverheadMS)
		}
		if (tr.ServerCPUMSPerTurn >= 0) != cpu {
			t.Errorf("%s: server CPU per turn %v, measured %v", tr.Name, tr.ServerCPUMSPerTurn, cpu)
		}
		for _, p := range Presets {
			e, ok := tr.E2E[p.String()]
			if !ok || e.RolloutS <= 0 || e.ModelS <= 0 || e.PrefixCachedRolloutS <= 0 || e.TTFTP50MS <= 0 || e.RatioVsHTTP <= 0 {
				t.Errorf("%s: e2e %s: %+v", tr.Name, p, e)
			}
			if e.RolloutS < e.ModelS {
				t.Errorf("%s: e2e %s: rollout %vs shorter than its model time %vs", tr.Name, p, e.RolloutS, e.ModelS)
			}
		}
	}
	if r := rep.Transports[0].OverheadRatio; r != 1 {
		t.Errorf("http's ratio against itself is %v", r)
	}
	for name, ev := range map[string]*EventsResult{"single": rep.Events.Single, "concurrent": rep.Events.Concurrent} {
		if ev == nil || ev.Events <= 0 || ev.EventsPerS <= 0 || ev.Seconds <= 0 {
			t.Errorf("events %s: %+v", name, ev)
			continue
		}
		if cpu != (ev.ServerCPUS >= 0) {
			t.Errorf("events %s: server CPU %v, measured %v", name, ev.ServerCPUS, cpu)
		}
	}
	if ev := rep.Events.Single; ev != nil && ev.Events < cfg.StreamTokens/2 {
		t.Errorf("one rollout of %d tokens streamed only %d events", cfg.StreamTokens, ev.Events)
	}
	if ev := rep.Events.Concurrent; ev != nil && ev.Rollouts != cfg.Concurrent {
		t.Errorf("concurrent rollouts %d, want %d", ev.Rollouts, cfg.Concurrent)
	}
}

// checkJSON checks the documented keys of the JSON report.
func checkJSON(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "started_at", "elapsed_s", "mode", "machine", "server", "workload", "transports", "events"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	trs, _ := m["transports"].([]any)
	if len(trs) != 4 {
		t.Fatalf("JSON transports: %v", m["transports"])
	}
	tr := trs[3].(map[string]any)
	for _, k := range []string{"name", "turns", "overhead_ms", "overhead_ratio_vs_http", "floor_ms", "floor_echo_ms",
		"floor_tokenize_ms", "overhead_vs_floor", "bytes_per_turn", "frame_bytes_per_turn", "server_cpu_ms_per_turn",
		"growth", "e2e", "per_turn"} {
		if _, ok := tr[k]; !ok {
			t.Errorf("JSON transport lacks %q", k)
		}
	}
	e2e := tr["e2e"].(map[string]any)
	for _, k := range []string{"65", "1000", "4000"} {
		e, _ := e2e[k].(map[string]any)
		for _, f := range []string{"rollout_s", "ratio_vs_http", "prefix_cached_rollout_s", "ttft_p50_ms"} {
			if _, ok := e[f]; !ok {
				t.Errorf("JSON e2e %s lacks %q", k, f)
			}
		}
	}
	turn := tr["per_turn"].([]any)[0].(map[string]any)
	for _, k := range []string{"rollout", "turn", "overhead_ms", "turn_ms", "floor_ms", "floor_echo_ms", "floor_tokenize_ms",
		"frame_bytes", "bytes_sent", "server_cpu_ms", "input_tokens", "cached_tokens", "prefill_tokens", "output_tokens",
		"new_input_tokens", "events"} {
		if _, ok := turn[k]; !ok {
			t.Errorf("JSON per_turn lacks %q", k)
		}
	}
	ev := m["events"].(map[string]any)
	for _, k := range []string{"single", "concurrent"} {
		e, _ := ev[k].(map[string]any)
		if _, ok := e["events_per_s"]; !ok {
			t.Errorf("JSON events.%s lacks events_per_s", k)
		}
	}
}

// checkSVG checks that the chart is well-formed XML with one line per transport and the floor.
func checkSVG(t *testing.T, path string, rep *Report) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	lines := map[string]int{}
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			if se.Name.Local == "polyline" {
				for _, a := range se.Attr {
					if a.Name.Local == "points" {
						lines[fmt.Sprint(len(lines))] = len(strings.Fields(a.Value))
					}
				}
			}
		}
	}
	if root != "svg" {
		t.Errorf("SVG root element %q", root)
	}
	if len(lines) != len(rep.Transports)+1 {
		t.Errorf("SVG has %d lines, want %d (transports and the floor)", len(lines), len(rep.Transports)+1)
	}
	for i, n := range lines {
		if n != rep.Workload.Turns {
			t.Errorf("SVG line %s has %d points, want %d", i, n, rep.Workload.Turns)
		}
	}
	for _, tr := range rep.Transports {
		if name := tr.Name; !bytes.Contains(data, []byte(">"+name+"<")) {
			t.Errorf("SVG legend lacks %s", name)
		}
	}
}

// TestSpawn starts this test binary as a server child, reads its CPU time, and stops it.
func TestSpawn(t *testing.T) {
	t.Setenv(childEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	child, err := Spawn(ctx, exe, "-test.run=^$")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := child.Stop(10 * time.Second); err != nil {
			t.Error(err)
		}
	}()
	if child.PID <= 0 || !strings.HasPrefix(child.URL, "http://127.0.0.1:") {
		t.Fatalf("child %+v", child)
	}
	cfg := tiny(child.URL)
	cfg.PID, cfg.Spawned = child.PID, true
	cfg.Transports = []string{Append, HTTP}
	cfg.Concurrent = -1
	cfg.Rollouts = 2
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Server.Spawned || rep.Server.PID != child.PID || !rep.Server.CPUMeasured {
		t.Errorf("server info %+v", rep.Server)
	}
	if len(rep.Transports) != 2 || rep.Transports[0].Name != HTTP || rep.Transports[1].Name != Append {
		t.Fatalf("transports not in report order: %+v", rep.Transports)
	}
	for _, tr := range rep.Transports {
		if tr.ServerCPUMSPerTurn < 0 {
			t.Errorf("%s: no server CPU", tr.Name)
		}
		if len(tr.PerTurn) != 2*(cfg.Calls+1) || tr.PerTurn[cfg.Calls+1].Rollout != 2 || tr.PerTurn[cfg.Calls+1].Turn != 1 {
			t.Errorf("%s: per_turn of 2 rollouts: %+v", tr.Name, tr.PerTurn)
		}
	}
	svg := filepath.Join(t.TempDir(), "b.svg")
	if err := rep.WriteSVG(svg); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, svg, rep)
	if rep.Events.Concurrent != nil || rep.Events.Single == nil {
		t.Errorf("events: %+v", rep.Events)
	}
}

// TestSpawnFailure reports a child that exits before listening, with its last log lines.
func TestSpawnFailure(t *testing.T) {
	_, err := Spawn(context.Background(), "/bin/sh", "-c", "echo 'listen tcp: address already in use' >&2; exit 3")
	if err == nil || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("err = %v", err)
	}
}

// TestRealtime runs the sim in real time at the 4000 preset: the end-to-end time is measured.
func TestRealtime(t *testing.T) {
	// tether serve's sim sleeps (Realtime); server.New's default sim does not.
	cfg := tiny(inProcess(t, server.Options{Model: sim.NewSim(sim.SimOptions{Realtime: true})}))
	cfg.Realtime, cfg.RealtimeSpeed = true, sim.Speed4000
	cfg.Calls, cfg.WarmupCalls, cfg.StreamTokens, cfg.Concurrent = 1, -1, -1, -1
	cfg.Transports = []string{WS, Append}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Mode != "realtime" || rep.RealtimeSpeed != "4000" {
		t.Errorf("mode %q %q", rep.Mode, rep.RealtimeSpeed)
	}
	ttft := sim.Speed4000.Cost().TTFT
	for _, tr := range rep.Transports {
		e, ok := tr.E2E["4000"]
		if !ok || !e.Measured || len(tr.E2E) != 1 {
			t.Fatalf("%s: e2e %+v", tr.Name, tr.E2E)
		}
		// Each turn sleeps at least the preset's time to first token.
		if e.RolloutS < 2*ttft.Seconds() || tr.OverheadMS.Min < ms(ttft) {
			t.Errorf("%s: rollout %vs, first item min %vms: the sim did not run in real time", tr.Name, e.RolloutS, tr.OverheadMS.Min)
		}
	}
	if rep.Events.Single != nil || rep.Events.Concurrent != nil {
		t.Errorf("events not skipped: %+v", rep.Events)
	}
	var b bytes.Buffer
	rep.WriteTable(&b, false)
	if !strings.Contains(b.String(), "measured") {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{{}, {URL: "ftp://x"}, {URL: "http://"}, {URL: "http://x", Transports: []string{"smtp"}}} {
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
	// A server that is not there.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	if _, err := Run(context.Background(), Config{URL: "http://" + addr, Calls: 1, WarmupCalls: -1, Timeout: 5 * time.Second}); err == nil {
		t.Error("no error for a closed port")
	}
}

func TestParseTransports(t *testing.T) {
	got, err := ParseTransports("append, http")
	if err != nil || len(got) != 2 || got[0] != Append || got[1] != HTTP {
		t.Errorf("got %v %v", got, err)
	}
	if all, _ := ParseTransports("all"); len(all) != 4 {
		t.Errorf("all: %v", all)
	}
	if _, err := ParseTransports("http,grpc"); err == nil {
		t.Error("grpc accepted")
	}
}

func TestEndpoints(t *testing.T) {
	for in, want := range map[string]endpoints{
		"http://127.0.0.1:8787":                {"http://127.0.0.1:8787", "http://127.0.0.1:8787/v1/responses", "ws://127.0.0.1:8787/v1/responses"},
		"ws://127.0.0.1:8787/v1/responses":     {"http://127.0.0.1:8787", "http://127.0.0.1:8787/v1/responses", "ws://127.0.0.1:8787/v1/responses"},
		"127.0.0.1:9":                          {"http://127.0.0.1:9", "http://127.0.0.1:9/v1/responses", "ws://127.0.0.1:9/v1/responses"},
		"https://tether.example/v1/responses/": {"https://tether.example", "https://tether.example/v1/responses", "wss://tether.example/v1/responses"},
	} {
		got, err := parseEndpoints(in)
		if err != nil || got != want {
			t.Errorf("%s: got %+v %v, want %+v", in, got, err, want)
		}
	}
}

func TestParseStat(t *testing.T) {
	// Field 2 may hold spaces and parentheses; utime and stime are fields 14 and 15.
	line := "4242 (tether (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 37 0 0 20 0 9 0 1000 0 0"
	got, err := parseStat(line)
	if err != nil || got != 1870*time.Millisecond {
		t.Errorf("got %v %v, want 1.87s", got, err)
	}
	if _, err := parseStat("4242 (short) S 1 2"); err == nil {
		t.Error("short line accepted")
	}
	if d, err := readCPU(os.Getpid()); err != nil || d < 0 {
		t.Errorf("readCPU(self) = %v %v", d, err)
	}
}

func TestListenAddr(t *testing.T) {
	line := `time=2026-01-01T00:00:00Z level=INFO msg="tether listening" addr=127.0.0.1:40123 model=sim speed=instant`
	if got := listenAddr(line); got != "127.0.0.1:40123" {
		t.Errorf("got %q", got)
	}
	if got := listenAddr(`level=INFO msg="connection opened" addr=x`); got != "" {
		t.Errorf("got %q from another line", got)
	}
}

func TestToolOutput(t *testing.T) {
	a, b := toolOutput(0, 7, 2048), toolOutput(0, 7, 2048)
	if a != b || len(a) != 2048 || !strings.HasPrefix(a, "$ echo tether-call-7\n") {
		t.Errorf("len %d, deterministic %v, prefix %q", len(a), a == b, a[:24])
	}
	if toolOutput(1, 7, 2048) == a {
		t.Error("rollouts share tool outputs")
	}
	// About 4 bytes a token, so 2 KiB outputs reach ~100k tokens in 200 calls.
	n := len(sim.RenderItems(nil, outputsFor(0, new(int), []call{{id: "call_1"}}, 2048).items))
	if n < 350 || n > 700 {
		t.Errorf("a 2 KiB tool output renders to %d tokens", n)
	}
}

func TestStatsAndFormat(t *testing.T) {
	s := stats([]float64{5, 1, 4, 2, 3})
	if s.P50 != 3 || s.Min != 1 || s.Max != 5 || s.Mean != 3 || s.P90 != 4.6 {
		t.Errorf("stats %+v", s)
	}
	if growthWindow(201) != 10 || growthWindow(4) != 2 || growthWindow(31) != 3 || growthWindow(1) != 1 {
		t.Error("growthWindow")
	}
	for v, want := range map[float64]string{0.0421: "42.1µs", 3.5: "3.50ms", 1234: "1.23s", -1: "n/a"} {
		if got := fmtMS(v); got != want {
			t.Errorf("fmtMS(%v) = %q, want %q", v, got, want)
		}
	}
	if got := fmtRate(153893.4); got != "153,893" {
		t.Errorf("fmtRate = %q", got)
	}
	if got := gridLabel(0.2); got != "200µs" {
		t.Errorf("gridLabel = %q", got)
	}
}
