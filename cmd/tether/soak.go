package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tetherd/tether/internal/progress"
	"github.com/tetherd/tether/internal/soak"
)

// errSoakFailed makes `tether soak` exit 1 after printing its report.
var errSoakFailed = errors.New("soak failed")

// soakCmd runs `tether soak`: N connections of M-turn rollouts in both shapes with
// disconnects, cancels, bad frames and slow readers, against -url or an in-process server.
func soakCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("soak", "Hold N connections of M-turn rollouts in both shapes with chaos; verify items and resources.\n"+
		"A run is a warm-up (as long as -duration, at most 2m), the load (-duration, plus up to 30s\n"+
		"for the rollouts in flight), settling (up to -settle, usually under a second) and the\n"+
		"-suspended measurement: with the defaults about 50s in all in-process, 130s with -url against\n"+
		"a plain 'tether serve' (1,000 tokens/s: slow readers' long answers use the 30s), measured on a\n"+
		"loaded 2-core machine. The report ends with the total run time. Against 'tether serve', its\n"+
		"per-key quotas count the whole soak as one client: start it with -key-rollouts 0\n"+
		"-key-connections 0 for more than the defaults (docs/soak.md).", stderr)
	url := fs.String("url", "", "a running server; empty starts an in-process server. Forms: "+urlForms)
	apiKey := fs.String("api-key", "", "API key sent as 'Authorization: Bearer …' (for -url)")
	pid := fs.Int("pid", 0, "with -url: the server's process id, to read its RSS from /proc/PID/status (default: /metrics)")
	conns := fs.Int("connections", soak.DefaultConnections, "connections held at once, half append shape, half public shape")
	turns := fs.Int("turns", soak.DefaultTurns, "tool calls per rollout (metadata sim.calls)")
	lanes := fs.Int("lanes", 0, "run N named lanes (stream_id) per connection, each with its own rollouts, concurrently; 0: the default lane")
	duration := fs.Duration("duration", soak.DefaultDuration, "how long new rollouts are started (the whole run is longer: see above)")
	seed := fs.Int64("seed", 1, "seed of the chaos")
	suspended := fs.Int("suspended", soak.DefaultSuspended, "suspended rollouts held to measure bytes per rollout (with -url at most the server's per-key rollout quota - 1; 0: skip)")
	warmup := fs.Duration("warmup", 0, "how long the same load runs before the starting figures are taken (0: -duration, at most 2m; negative: none)")
	settle := fs.Duration("settle", soak.DefaultSettle, "how long the server may take to return to its starting goroutines and RSS")
	stall := fs.Duration("stall", 0, "how long stalled readers stop reading (0: in-process write timeout + 2s; none with -url)")
	jsonPath := fs.String("json", "", "also write the report as JSON to this file ('-' for stdout instead of the text)")
	quiet := fs.Bool("quiet", false, "no progress line on stderr")
	density := fs.Int("density", 0, "instead of the soak: hold N append-shape rollouts suspended (-density-per-conn per connection) against an in-process server, live then parked (-park-after), and print bytes per rollout, goroutines, and resume p50/p99 from each (0: the soak)")
	densityInput := byteSize(0)
	fs.Var(&densityInput, "density-input", "with -density: each rollout's user input (e.g. 2KiB; 0: a short sentence, about 20 tokens of context)")
	densityPerConn := fs.Int("density-per-conn", soak.DensityPerConn, "with -density: rollouts held on each connection (each connection is two file descriptors of this process: a million rollouts need more than 50 per connection)")
	parkedOnly := fs.Bool("density-parked-only", false, "with -density: hold the rollouts parked only, without the live tier (a million live rollouts need tens of GiB)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *density > 0 {
		return densityRun(ctx, soak.DensityConfig{Rollouts: *density, InputBytes: int(densityInput), PerConn: *densityPerConn, ParkedOnly: *parkedOnly}, *jsonPath, *quiet, stdout, stderr)
	}
	if *url != "" {
		su, err := parseServerURL("-url", *url)
		if err != nil {
			return err
		}
		*url = su.Base()
	}
	cfg := soak.Config{URL: *url, APIKey: *apiKey, PID: *pid, Connections: *conns, Turns: *turns, Lanes: *lanes,
		Duration: *duration, Seed: *seed, Suspended: *suspended, Settle: *settle, StallPause: *stall, Warmup: *warmup}
	if *suspended == 0 {
		cfg.Suspended = -1
	}
	var line *progress.Line
	if !*quiet {
		line = progress.New(stderr, "soak")
		phase := ""
		cfg.Progress = func(p soak.Progress) {
			force := p.Phase != phase // a new phase always shows
			phase = p.Phase
			line.Show(fmt.Sprintf("%s %.0fs/%s  conns %d  rollouts %d  steps %d  errors %d  lost %d  dup %d  violations %d  goroutines %d  rss %.0f MiB",
				p.Phase, p.Elapsed.Seconds(), p.Duration, p.Connections, p.Rollouts, p.Steps, p.Errors, p.Lost, p.Duplicated, p.Violations,
				p.Goroutines, float64(p.RSS)/(1<<20)), force)
		}
	}
	rep, err := soak.Run(ctx, cfg)
	line.Done()
	if err != nil {
		return err
	}
	if *jsonPath == "-" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		rep.WriteText(stdout)
		if *jsonPath != "" {
			b, err := json.MarshalIndent(rep, "", "  ")
			if err != nil {
				return err
			}
			if err := os.WriteFile(*jsonPath, append(b, '\n'), 0o644); err != nil {
				return err
			}
		}
	}
	if !rep.Pass {
		return fmt.Errorf("%w: %s", errSoakFailed, strings.Join(rep.Failures, "; "))
	}
	return nil
}

// densityRun runs `tether soak -density N` (soak.Density) and prints its report (JSON to
// jsonPath too; "-" for JSON instead of the text).
func densityRun(ctx context.Context, cfg soak.DensityConfig, jsonPath string, quiet bool, stdout, stderr io.Writer) error {
	if !quiet {
		cfg.Progress = func(msg string) { fmt.Fprintln(stderr, "density: "+msg) }
	}
	rep, err := soak.Density(ctx, cfg)
	if err != nil {
		return err
	}
	if jsonPath != "-" {
		rep.WriteText(stdout)
	}
	if jsonPath == "" {
		return nil
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if jsonPath == "-" {
		_, err = stdout.Write(append(b, '\n'))
		return err
	}
	return os.WriteFile(jsonPath, append(b, '\n'), 0o644)
}
