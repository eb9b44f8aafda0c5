package clients_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
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

// codexFallbackNotice is the start of the item Codex prints when it gives up on WebSockets and
// silently continues over HTTP POST + SSE.
const codexFallbackNotice = "Falling back from WebSockets"

// codexConfig is $CODEX_HOME/config.toml: a custom provider on Tether over WebSocket
// (custom providers default to HTTP; supports_websockets = true switches them). The features,
// analytics and otel tables keep Codex off the network (no plugin sync, no update check, no
// telemetry): with them it connects only to the server (checked with strace).
const codexConfig = `model = %q
model_provider = "tether"
check_for_update_on_startup = false
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.tether]
name = "Tether"
base_url = %q
env_key = "TETHER_API_KEY"
wire_api = "responses"
supports_websockets = true
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 20000

[features]
plugins = false
remote_plugin = false
apps = false

[analytics]
enabled = false

[otel]
exporter = "none"
trace_exporter = "none"
metrics_exporter = "none"
`

// codexEvent is one line of codex exec --json.
type codexEvent struct {
	Type string `json:"type"`
	Item struct {
		Type             string `json:"type"`
		Command          string `json:"command"`
		AggregatedOutput string `json:"aggregated_output"`
		ExitCode         *int   `json:"exit_code"`
		Text             string `json:"text"`
		Message          string `json:"message"`
	} `json:"item"`
}

// codexRun is one finished codex exec.
type codexRun struct {
	stdout, stderr string
	commands       []codexEvent // item.completed of type command_execution
	answer         string       // the last agent_message
}

// codex is the Codex CLI, configured for a fixture in a temporary CODEX_HOME.
type codex struct {
	bin, home, work string
	f               *fixture
}

func newCodex(t *testing.T, f *fixture, model string) *codex {
	t.Helper()
	dir := nodeClients(t, "@openai/codex/package.json", ".bin/codex")
	if _, err := exec.LookPath("node"); err != nil { // .bin/codex is a node launcher
		t.Fatalf("node is not installed, but %s=%s is set: %v", envNodeClients, dir, err)
	}
	c := &codex{bin: filepath.Join(dir, "node_modules", ".bin", "codex"), home: t.TempDir(), work: t.TempDir(), f: f}
	if err := os.WriteFile(filepath.Join(c.home, "config.toml"), []byte(fmt.Sprintf(codexConfig, model, f.base)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			f.logFrames(t, 1500)
		}
	})
	return c
}

// exec runs codex exec --json with args and checks that it succeeded without an error item,
// a failed turn, or the fallback notice.
func (c *codex) exec(t *testing.T, args ...string) codexRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append([]string{"exec", "--json", "--skip-git-repo-check", "--color", "never"}, args...)...)
	cmd.Dir = c.work
	cmd.Env = codexEnv(c.home)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err := cmd.Run()
	run := codexRun{stdout: stdout.String(), stderr: stderr.String()}
	t.Logf("codex exec %q: %v, exit %v\nstdout:\n%s\nstderr:\n%s", args, time.Since(start).Round(time.Millisecond), err, run.stdout, run.stderr)
	if err != nil {
		t.Fatalf("codex exec failed: %v", err)
	}
	turnDone := false
	sc := bufio.NewScanner(strings.NewReader(run.stdout))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Text()
		var ev codexEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Errorf("codex printed a line that is not JSON: %q", line)
			continue
		}
		switch {
		case ev.Type == "item.completed" && ev.Item.Type == "command_execution":
			run.commands = append(run.commands, ev)
		case ev.Type == "item.completed" && ev.Item.Type == "agent_message":
			run.answer = ev.Item.Text
		case ev.Type == "turn.completed":
			turnDone = true
		case ev.Item.Type == "error" && strings.HasPrefix(ev.Item.Message, "Model metadata for `sim` not found"):
			// Codex warns that "sim" is not in its catalog; harmless.
		case ev.Type == "turn.failed" || ev.Type == "error" || ev.Item.Type == "error":
			t.Errorf("codex reported an error: %s", line)
		}
	}
	if !turnDone {
		t.Errorf("no turn.completed")
	}
	if strings.Contains(run.stdout+run.stderr, codexFallbackNotice) {
		t.Errorf("codex fell back from WebSockets to HTTP (%q)", codexFallbackNotice)
	}
	return run
}

// checkTool checks that Codex ran exactly one "echo <marker>" with exit code 0.
func (r codexRun) checkTool(t *testing.T, marker string) {
	t.Helper()
	if len(r.commands) != 1 {
		t.Fatalf("want 1 command_execution, got %d", len(r.commands))
	}
	c := r.commands[0].Item
	if !strings.Contains(c.Command, "echo "+marker) || c.ExitCode == nil || *c.ExitCode != 0 ||
		!strings.Contains(c.AggregatedOutput, marker) {
		t.Errorf("command_execution: %+v", c)
	}
}

// creates returns the response.create frames the server received, by connection.
func (f *fixture) creates() (all []map[string]any, conns map[int][]map[string]any) {
	conns = map[int][]map[string]any{}
	for _, fr := range f.tap.Frames() {
		var m map[string]any
		if !fr.ToServer || fr.Opcode != 1 || json.Unmarshal(fr.Payload, &m) != nil || m["type"] != "response.create" {
			continue
		}
		all = append(all, m)
		conns[fr.Conn] = append(conns[fr.Conn], m)
	}
	return all, conns
}

// TestCodexExecOverWebSocket runs real Codex CLI turns against Tether. In the first, the sim
// calls exec_command with "echo tether-call-1"; Codex runs it and sends the output on the same
// socket (a previous_response_id chain after a generate:false warm-up); the sim answers. With
// gpt-5.5, "codex exec resume" then continues the session on a new socket with the full
// history. Everything must go over WebSocket: no POST /v1/responses and no fallback notice.
func TestCodexExecOverWebSocket(t *testing.T) {
	// gpt-5.5 is in Codex's bundled catalog (it adds apply_patch as a custom tool, tool_search,
	// reasoning effort and text verbosity); sim is unknown to Codex (fallback model metadata).
	for _, model := range []string{"gpt-5.5", "sim"} {
		t.Run(model, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{logLevel: slog.LevelDebug})
			cx := newCodex(t, f, model)
			const prompt = "Check the disk usage with a shell command." // the sim quotes ~64 characters
			last := filepath.Join(cx.work, "last-message.txt")
			run := cx.exec(t, "-o", last, prompt)
			run.checkTool(t, "tether-call-1")
			// The answer quotes the user prompt and the tool output (Codex's output starts with
			// its "Chunk ID:" header) and ends with the sim's context fingerprint.
			for _, want := range []string{prompt, `tool: "Chunk ID:`, "[ctx "} {
				if !strings.Contains(run.answer, want) {
					t.Errorf("answer does not contain %q: %q", want, run.answer)
				}
			}
			if b, err := os.ReadFile(last); err != nil || strings.TrimSpace(string(b)) != strings.TrimSpace(run.answer) {
				t.Errorf("-o file: %q (%v), want the answer", b, err)
			}
			if p, u := f.posts.Load(), f.upgrades.Load(); p != 0 || u != 1 {
				t.Errorf("server saw %d POST /v1/responses and %d upgrades, want 0 and 1", p, u)
			}

			// On the wire: a warm-up, then the turn and the tool output, each chained.
			creates, conns := f.creates()
			if len(creates) != 3 || len(conns) != 1 {
				t.Fatalf("want 3 response.create frames on 1 connection, got %d on %d", len(creates), len(conns))
			}
			if creates[0]["generate"] != false || creates[1]["previous_response_id"] == nil || creates[2]["previous_response_id"] == nil {
				t.Errorf("want a generate:false warm-up and two chained creates; got generate=%v prev=%v,%v",
					creates[0]["generate"], creates[1]["previous_response_id"], creates[2]["previous_response_id"])
			}
			if in, _ := json.Marshal(creates[2]["input"]); !strings.Contains(string(in), `"function_call_output"`) || !strings.Contains(string(in), "tether-call-1") {
				t.Errorf("third create does not carry the tool output: %s", in)
			}
			cs := f.srv.Counters()
			if cs.Hot.Load() != 2 || cs.Cold.Load() != 0 || cs.WarmUp.Load() != 1 {
				t.Errorf("want the warm-up and 2 hot continuations (hot %d, cold %d, warm-up %d)", cs.Hot.Load(), cs.Cold.Load(), cs.WarmUp.Load())
			}
			if model != "gpt-5.5" {
				return
			}

			// A second turn in a new process: Codex replays the whole session (its
			// function_call, output and assistant message items) on a new socket.
			const second = "Now list the files."
			run2 := cx.exec(t, "resume", "--last", second)
			run2.checkTool(t, "tether-call-2")
			for _, want := range []string{prompt, second, "[ctx "} {
				if !strings.Contains(run2.answer, want) {
					t.Errorf("resumed answer does not contain %q: %q", want, run2.answer)
				}
			}
			if p, u := f.posts.Load(), f.upgrades.Load(); p != 0 || u != 2 {
				t.Errorf("server saw %d POST /v1/responses and %d upgrades, want 0 and 2", p, u)
			}
		})
	}
}

// TestCodexHTTPControl checks the test's own detector: with supports_websockets=false Codex
// must show up as POST /v1/responses and no upgrade (and it works over HTTP SSE too).
func TestCodexHTTPControl(t *testing.T) {
	f := newFixture(t, fixtureOptions{logLevel: slog.LevelDebug})
	cx := newCodex(t, f, "gpt-5.5")
	run := cx.exec(t, "--ephemeral", "-c", "model_providers.tether.supports_websockets=false", "Check the disk usage over HTTP.")
	run.checkTool(t, "tether-call-1")
	if !strings.Contains(run.answer, "Check the disk usage over HTTP.") {
		t.Errorf("answer: %q", run.answer)
	}
	if p, u := f.posts.Load(), f.upgrades.Load(); p != 2 || u != 0 {
		t.Errorf("server saw %d POST /v1/responses and %d upgrades, want 2 and 0", p, u)
	}
}

// codexEnv is the environment for codex: the caller's, minus anything that could point Codex
// elsewhere (CODEX_*, OPENAI_*), with an isolated CODEX_HOME and HOME.
func codexEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "CODEX_") || strings.HasPrefix(k, "OPENAI_") || k == "HOME" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "CODEX_HOME="+home, "HOME="+home, "TETHER_API_KEY=sk-test", "NO_COLOR=1", "RUST_LOG=warn")
}

// TestCodexIdleTimeoutKeepAlive: at the sim's 65 tokens/s preset every sampling step starts
// with 500 ms of silence (its time to first token, plus the prefill), longer than a 400 ms
// stream_idle_timeout_ms. Tether's keepalive (a repeated response.in_progress after 100 ms of
// silence) keeps Codex on the WebSocket; the control run without keepalive shows that Codex
// does give up on such a silence. This is the reported failure (15 s idle timeout, 40 s prefill)
// scaled down to keep CI short.
func TestCodexIdleTimeoutKeepAlive(t *testing.T) {
	slow := sim.NewSim(sim.SimOptions{Speed: sim.Speed65, Realtime: true})
	idle := "model_providers.tether.stream_idle_timeout_ms=400"
	t.Run("keepalive", func(t *testing.T) {
		f := newFixture(t, fixtureOptions{server: server.Options{Model: slow, Limits: session.Limits{KeepAlive: 100 * time.Millisecond}}, logLevel: slog.LevelDebug})
		cx := newCodex(t, f, "gpt-5.5")
		run := cx.exec(t, "--ephemeral", "-c", idle, "Check the disk usage with a shell command.")
		run.checkTool(t, "tether-call-1")
		if p := f.posts.Load(); p != 0 {
			t.Errorf("server saw %d POST /v1/responses, want 0", p)
		}
	})
	t.Run("control without keepalive", func(t *testing.T) {
		f := newFixture(t, fixtureOptions{server: server.Options{Model: slow, Limits: session.Limits{KeepAlive: -1}}, logLevel: slog.LevelInfo})
		cx := newCodex(t, f, "gpt-5.5")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, cx.bin, "exec", "--json", "--skip-git-repo-check", "--color", "never", "--ephemeral",
			"-c", idle, "-c", "model_providers.tether.stream_max_retries=0", "Check the disk usage with a shell command.")
		cmd.Dir, cmd.Env, cmd.WaitDelay = cx.work, codexEnv(cx.home), 10*time.Second
		out, err := cmd.CombinedOutput()
		if err == nil && !strings.Contains(string(out), codexFallbackNotice) && f.posts.Load() == 0 {
			t.Fatalf("codex kept the WebSocket through a silence longer than its idle timeout without keepalives:\n%s", out)
		}
	})
}
