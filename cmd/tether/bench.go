package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tetherd/tether/internal/bench"
	"github.com/tetherd/tether/sampler/sim"
)

// benchCmd runs `tether bench`: the same agent workload through http, http-prev, ws and
// append, against a `tether serve` child process (default) or -url; with -engine also the
// engine driven directly over Chat Completions.
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", "Run one agent workload over http, http-prev, ws and append and compare their overhead.\n\n"+
		"Against a real model (a server whose GET /v1/models does not list 'sim', -model, or -engine) every rollout has\n"+
		"K+1 turns whether or not the model calls the tool (a turn without calls is followed by a user message on the same\n"+
		"chain), each turn is bounded by -max-output-tokens at temperature 0, and the report gives the engine's own\n"+
		"prefill and cached tokens per turn. With -engine the engine itself is driven over Chat Completions with the\n"+
		"whole history each turn (transport 'engine', what an agent does without Tether) beside Tether's transports;\n"+
		"without -url, 'tether serve -backend chat -upstream <engine>' is spawned in front of it.", stderr)
	url := fs.String("url", "", "a running server; empty spawns 'tether serve' on a free loopback port (needed for server CPU numbers; with -engine, in front of that engine). Forms: "+urlForms)
	apiKey := fs.String("api-key", "", "API key sent as 'Authorization: Bearer …' (for -url)")
	engine := fs.String("engine", "", "the /v1 base URL of the Chat Completions engine behind the server (e.g. http://127.0.0.1:8081/v1): adds the 'engine' transport, which drives it directly")
	engineKeyFile := fs.String("engine-api-key-file", "", "file holding the API key sent to -engine")
	upstreamSlots := fs.Int("upstream-slots", 0, "with -engine and no -url: the spawned server's -upstream-slots (llama.cpp llama-server -np; 0: the engine chooses slots)")
	model := fs.String("model", "", "the model of every request; empty asks the server's GET /v1/models ('sim' when listed, else its first model)")
	maxOutput := fs.Int("max-output-tokens", bench.DefaultMaxOutputTokens, "against a real model: max_output_tokens of each turn")
	transports := fs.String("transports", "all", "comma-separated transports: http, http-prev, ws, append, engine (all: Tether's four, and engine with -engine)")
	rollouts := fs.Int("rollouts", bench.DefaultRollouts, "rollouts per transport (R)")
	calls := fs.Int("calls", bench.DefaultCalls, fmt.Sprintf("tool calls per rollout (K); a rollout has K+1 turns (against a real model the default is %d)", bench.DefaultEngineCalls))
	toolOutput := byteSize(bench.DefaultToolOutputBytes)
	fs.Var(&toolOutput, "tool-output", fmt.Sprintf("size of each tool output (e.g. 2KiB; against a real model the default is %d B, and a follow-up user message is as long)", bench.DefaultEngineToolOutputBytes))
	warmup := fs.Int("warmup-calls", bench.DefaultWarmupCalls, "tool calls of the discarded warm-up rollout per transport (negative: none)")
	realtime := fs.Bool("realtime", false, "run the sim in real time at -realtime-speed instead of instant (a live demo; end-to-end times are then measured, not derived; with -url the server's sim must sleep, as tether serve's does)")
	realtimeSpeed := fs.String("realtime-speed", "1000", "sim preset for -realtime: 65, 1000 or 4000 (tokens/s)")
	streamTokens := fs.Int("stream-tokens", bench.DefaultStreamTokens, "answer tokens of the one-rollout events/s measurement (negative: skip; skipped with -realtime unless set)")
	concurrent := fs.Int("concurrent", bench.DefaultConcurrent, "concurrent rollouts of the aggregate events/s measurement (negative: skip; skipped with -realtime unless set)")
	concurrentTokens := fs.Int("concurrent-tokens", bench.DefaultConcurrentTokens, "answer tokens of each concurrent rollout")
	concurrentCalls := fs.Int("concurrent-calls", bench.DefaultConcurrentCalls, "tool calls of each rollout of the aggregate turns/s measurement (-concurrent rollouts at once; negative: skip)")
	cpus := fs.Int("cpus", 0, "GOMAXPROCS of the spawned server (0: all of the machine's CPUs; ignored with -url)")
	timeout := fs.Duration("timeout", bench.DefaultTimeout, "give up after this long")
	jsonPath := fs.String("json", "", "write the report as JSON to this file (keys: see package internal/bench)")
	svgPath := fs.String("svg", "", "write the chart (overhead per turn by transport) as SVG to this file")
	mdPath := fs.String("md", "", "write the tables as Markdown to this file")
	quiet := fs.Bool("quiet", false, "no progress line on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *url != "" {
		su, err := parseServerURL("-url", *url)
		if err != nil {
			return err
		}
		*url = su.Base()
	}
	trs, err := bench.ParseTransports(*transports)
	if err != nil {
		return fmt.Errorf("-transports: %w", err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *engine != "" {
		su, err := parseServerURL("-engine", *engine)
		if err != nil {
			return err
		}
		*engine = su.API()
		if !set["transports"] || strings.TrimSpace(*transports) == "all" {
			trs = nil // Tether's four and the engine
		}
	}
	if *upstreamSlots < 0 || *upstreamSlots > 0 && (*engine == "" || *url != "") {
		return fmt.Errorf("%w: bench: -upstream-slots is for the server spawned in front of -engine (no -url), and 0 or more", errUsage)
	}
	var engineKey string
	if *engineKeyFile != "" {
		b, err := os.ReadFile(*engineKeyFile)
		if err != nil {
			return fmt.Errorf("-engine-api-key-file: %w", err)
		}
		engineKey = strings.TrimSpace(string(b))
	}
	cfg := bench.Config{
		URL: *url, APIKey: *apiKey, Transports: trs,
		Model: *model, Engine: *engine, EngineAPIKey: engineKey, MaxOutputTokens: *maxOutput,
		Rollouts: *rollouts, Calls: *calls, ToolOutputBytes: int(toolOutput), WarmupCalls: *warmup,
		Realtime: *realtime, StreamTokens: *streamTokens, Concurrent: *concurrent, ConcurrentTokens: *concurrentTokens,
		ConcurrentCalls: *concurrentCalls,
		Timeout:         *timeout,
	}
	if *warmup == 0 {
		cfg.WarmupCalls = -1
	}
	// Unset, K and the tool output take the mode's default (the bench knows the mode once it
	// has asked the server for its models).
	if !set["calls"] {
		cfg.Calls = 0
	}
	if !set["tool-output"] {
		cfg.ToolOutputBytes = 0
	}
	if *maxOutput <= 0 {
		return fmt.Errorf("%w: bench: -max-output-tokens: want more than 0, got %d", errUsage, *maxOutput)
	}
	if *realtime {
		// The events/s measurements are paced by the model in real time: skip them unless asked.
		if !set["stream-tokens"] {
			cfg.StreamTokens = 0
		}
		if !set["concurrent"] {
			cfg.Concurrent = 0
		}
		if !set["concurrent-calls"] {
			cfg.ConcurrentCalls = 0
		}
		sp, err := sim.ParseSpeed(*realtimeSpeed)
		if err != nil || sp == sim.SpeedInstant {
			return fmt.Errorf("-realtime-speed: want 65, 1000 or 4000, got %q", *realtimeSpeed)
		}
		cfg.RealtimeSpeed = sp
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	if cfg.URL == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench: cannot find the tether binary to spawn: %w (or use -url)", err)
		}
		speed := "instant"
		if *realtime {
			speed = cfg.RealtimeSpeed.String()
		}
		if *cpus > 0 {
			// The child inherits the environment: GOMAXPROCS bounds the server's parallelism
			// while the bench's own goroutines (the load) keep every core.
			os.Setenv("GOMAXPROCS", strconv.Itoa(*cpus))
			cfg.ServerCPUs = *cpus
		}
		args := []string{"serve", "-addr", "127.0.0.1:0", "-model-speed", speed,
			"-log-level", "info", "-max-connection-age", "0", "-suspend-timeout", "10m", "-shutdown-grace", "2s",
			"-store-bytes", "2GiB", "-store-responses", "100000"}
		if cfg.Engine != "" {
			args = append(args, "-backend", "chat", "-upstream", cfg.Engine, "-upstream-slots", strconv.Itoa(*upstreamSlots))
			if *engineKeyFile != "" {
				args = append(args, "-upstream-api-key-file", *engineKeyFile)
			}
		}
		child, err := bench.Spawn(ctx, exe, args...)
		if err != nil {
			return err
		}
		defer child.Stop(10 * time.Second)
		cfg.URL, cfg.PID, cfg.Spawned = child.URL, child.PID, true
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	rep.Command = "tether bench " + strings.Join(args, " ")
	rep.WriteTable(stdout, false)
	var errs []string
	write := func(path, what string, f func(string) error) {
		if path == "" {
			return
		}
		if err := f(path); err != nil {
			errs = append(errs, fmt.Sprintf("%s %s: %v", what, path, err))
			return
		}
		fmt.Fprintf(stderr, "wrote %s\n", path)
	}
	write(*jsonPath, "-json", rep.WriteJSON)
	write(*svgPath, "-svg", rep.WriteSVG)
	write(*mdPath, "-md", rep.WriteMarkdown)
	if len(errs) > 0 {
		return fmt.Errorf("bench: %s", strings.Join(errs, "; "))
	}
	return nil
}
