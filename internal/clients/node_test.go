package clients_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session"
)

// runNode runs testdata/node/<script> against f with the openai npm package from
// TETHER_NODE_CLIENTS and returns its stdout. The script exits non-zero on any failure.
func runNode(t *testing.T, f *fixture, script string) string {
	t.Helper()
	return runNodeWith(t, f, script, nil, "openai/package.json", "ws/package.json")
}

// runNodeWith is runNode with extra environment variables, for a script that needs the npm
// packages at paths (relative to node_modules).
func runNodeWith(t *testing.T, f *fixture, script string, env []string, paths ...string) string {
	t.Helper()
	dir := nodeClients(t, paths...)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed, but %s=%s is set: %v", envNodeClients, dir, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	path, err := filepath.Abs(filepath.Join("testdata", "node", script))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, path)
	cmd.Env = append(os.Environ(), envNodeClients+"="+dir, "TETHER_BASE_URL="+f.base, "NO_COLOR=1")
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	t.Logf("node %s: %v\nstdout: %s\nstderr: %s", script, time.Since(start).Round(time.Millisecond), stdout.String(), stderr.String())
	if err != nil {
		f.logFrames(t, 600)
		t.Fatalf("node %s: %v", script, err)
	}
	return stdout.String()
}

func TestNodeResponsesWSToolRollout(t *testing.T) {
	f := newFixture(t, fixtureOptions{logLevel: slog.LevelWarn})
	out := runNode(t, f, "ws_tool_rollout.mjs")
	if !strings.Contains(out, `"ok":true`) {
		t.Fatalf("script did not report ok: %s", out)
	}
	if f.upgrades.Load() != 1 || f.posts.Load() != 0 {
		t.Errorf("server saw %d upgrades and %d POSTs, want 1 and 0", f.upgrades.Load(), f.posts.Load())
	}
	if hot := f.srv.Counters().Hot.Load(); hot != 1 {
		t.Errorf("hot-path continuations: %d, want 1", hot)
	}
}

func TestNodeHTTPStreamAccumulator(t *testing.T) {
	f := newFixture(t, fixtureOptions{logLevel: slog.LevelWarn})
	out := runNode(t, f, "http_stream.mjs")
	if !strings.Contains(out, `"ok":true`) {
		t.Fatalf("script did not report ok: %s", out)
	}
	if f.posts.Load() != 2 {
		t.Errorf("server saw %d POSTs, want 2", f.posts.Load())
	}
}

// TestNodeKeepAlives runs both openai-node scripts against the realtime 65 tokens/s sim with a
// 100 ms keepalive: every sampling step starts with 500 ms of silence, so the clients receive
// repeated response.in_progress events (SSE and WebSocket) and must still accumulate the same
// Responses.
func TestNodeKeepAlives(t *testing.T) {
	for _, script := range []string{"ws_tool_rollout.mjs", "http_stream.mjs"} {
		t.Run(script, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{logLevel: slog.LevelWarn, server: server.Options{
				Model:  sim.NewSim(sim.SimOptions{Speed: sim.Speed65, Realtime: true}),
				Limits: session.Limits{KeepAlive: 100 * time.Millisecond},
			}})
			out := runNode(t, f, script)
			if !strings.Contains(out, `"ok":true`) {
				t.Fatalf("script did not report ok: %s", out)
			}
			if n := f.countFrames("response.in_progress"); script == "ws_tool_rollout.mjs" && n < 3 {
				t.Errorf("only %d response.in_progress frames: no keepalive was exercised", n)
			}
		})
	}
}

// countFrames counts the server→client WebSocket frames of type typ.
func (f *fixture) countFrames(typ string) int {
	n := 0
	for _, fr := range f.tap.Frames() {
		var m map[string]any
		if !fr.ToServer && fr.Opcode == 1 && json.Unmarshal(fr.Payload, &m) == nil && m["type"] == typ {
			n++
		}
	}
	return n
}
