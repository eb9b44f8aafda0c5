package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
)

// TestBenchCommand runs `tether bench -url …` against an in-process server with a tiny
// workload, one flag set from the environment, and checks its outputs.
func TestBenchCommand(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // registered first: runs after the server's cleanup
	_, base := servertest.Start(t, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Setenv("TETHER_BENCH_CALLS", "2")
	dir := t.TempDir()
	jsonPath, svgPath, mdPath := filepath.Join(dir, "b.json"), filepath.Join(dir, "b.svg"), filepath.Join(dir, "b.md")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"bench", "-url", base, "-rollouts", "1", "-tool-output", "256", "-warmup-calls", "0",
		"-stream-tokens", "100", "-concurrent", "2", "-concurrent-tokens", "20",
		"-json", jsonPath, "-svg", svgPath, "-md", mdPath}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"2 tool calls (3 turns)", "\nhttp ", "\nhttp-prev ", "\nws ", "\nappend ", "events/s, 2 concurrent rollouts"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr.String(), "bench done") || !strings.Contains(stderr.String(), "wrote "+svgPath) {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	var rep struct {
		Workload struct {
			Calls, Turns int
		}
		Transports []struct {
			Name    string
			PerTurn []json.RawMessage `json:"per_turn"`
		}
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Workload.Calls != 2 || rep.Workload.Turns != 3 || len(rep.Transports) != 4 || len(rep.Transports[3].PerTurn) != 3 {
		t.Errorf("JSON report: %+v", rep)
	}
	for _, p := range []string{svgPath, mdPath} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestBenchCommandFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	for _, args := range [][]string{
		{"bench", "-transports", "grpc"},
		{"bench", "-realtime", "-realtime-speed", "instant", "-url", "http://127.0.0.1:9"},
		{"bench", "extra"},
		{"bench", "-upstream-slots", "4", "-url", "http://127.0.0.1:9"}, // only for the spawned server in front of -engine
		{"bench", "-engine", "ftp://127.0.0.1:9/v1"},
		{"bench", "-engine", "http://127.0.0.1:9/v1", "-max-output-tokens", "0"},
		{"bench", "-transports", "engine", "-url", "http://127.0.0.1:9"}, // engine without -engine
	} {
		if err := run(context.Background(), args, &stdout, &stderr); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	stdout.Reset()
	if err := run(context.Background(), []string{"help"}, &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), "bench ") {
		t.Errorf("usage lacks bench: %v\n%s", err, stdout.String())
	}
}
