package llamatest

import (
	"github.com/tetherd/tether/internal/skipnote"

	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Version is the node-llama-cpp release whose bundled llama.cpp source .ci/build-llama builds.
const Version = "3.21.1"

// Model is the name the server lists its model under (GET /v1/models).
const Model = "aidreams"

// ToolSeed, ToolPrompt and Tool make the model run a tool rollout: an engine started with
// Options.Seed = ToolSeed, asked ToolPrompt at temperature 1 with Tool offered, calls it
// (complete calls, several at once after the first turn) for a few turns and then answers.
// The location is an enum: with a free string this model never closes the argument.
const (
	ToolSeed   = 8
	ToolPrompt = "weather 0"
)

// Tool is the Responses API function tool of ToolPrompt.
var Tool = map[string]any{"type": "function", "name": "get_weather", "description": "Get the weather",
	"parameters": map[string]any{"type": "object", "required": []string{"location"}, "additionalProperties": false,
		"properties": map[string]any{"location": map[string]any{"type": "string", "enum": []string{"Paris", "London"}}}}}

// Options configure a Server. The zero value is one slot of 2,048 tokens with the engine's
// host-RAM prompt cache on and no slot save directory.
type Options struct {
	// Slots is llama-server's -np (parallel slots); 0 means 1.
	Slots int
	// SlotContext is each slot's context in tokens; 0 means 2048. The model was trained on 128
	// positions: its context_length is overridden to fit (text past 128 positions is babble,
	// mechanically sound).
	SlotContext int
	// NoCacheRAM starts the engine with --cache-ram 0: a slot's KV lives only in the slot, as on
	// an engine whose host memory is full.
	NoCacheRAM bool
	// SlotSave starts the engine with --slot-save-path (Server.SlotDir), enabling
	// POST /slots/N?action=save|restore.
	SlotSave bool
	// Seed is the engine's default sampling seed (--seed); 0 means 1. With one thread each
	// request's output is then a function of its prompt and settings.
	Seed int
	// SlotDir is the --slot-save-path with SlotSave; "" means a new temporary directory.
	// Replicas of one test share one to be driven by one Tether.
	SlotDir string
}

// Server is a llama-server process owned by a test.
type Server struct {
	t       *testing.T
	args    []string
	bin     string
	port    int
	slotDir string

	mu   sync.Mutex // guards cmd and done
	cmd  *exec.Cmd
	done chan struct{}
	log  *logTail
}

// Start starts a llama-server for t with opts and stops it in t.Cleanup. It skips the test
// (fails it with TETHER_REQUIRE_LLAMA=1) when the binary or the model is missing.
func Start(t *testing.T, opts Options) *Server {
	t.Helper()
	bin, models := find(t)
	slots := max(opts.Slots, 1)
	ctxn := opts.SlotContext
	if ctxn <= 0 {
		ctxn = 2048
	}
	s := &Server{t: t, bin: bin, port: freePort(t)}
	s.args = []string{
		"-m", filepath.Join(models, "aidreams260K.gguf"),
		"--host", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"-np", strconv.Itoa(slots), "-c", strconv.Itoa(slots * ctxn),
		"--override-kv", "llama.context_length=int:" + strconv.Itoa(max(ctxn, 2048)),
		"--jinja", "--chat-template-file", filepath.Join(models, "tools-paren.jinja"),
		"-t", "1", "--seed", strconv.Itoa(max(opts.Seed, 1)), "--no-webui", "--alias", Model,
	}
	if opts.NoCacheRAM {
		s.args = append(s.args, "--cache-ram", "0")
	}
	if opts.SlotSave {
		s.slotDir = opts.SlotDir
		if s.slotDir == "" {
			s.slotDir = t.TempDir()
		}
		s.args = append(s.args, "--slot-save-path", s.slotDir)
	}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// find returns the llama-server binary and the model directory, or skips (fails) the test.
func find(t *testing.T) (bin, models string) {
	t.Helper()
	bin, models, missing := locate()
	if missing != "" {
		if os.Getenv("TETHER_REQUIRE_LLAMA") == "1" {
			t.Fatal(missing + " (TETHER_REQUIRE_LLAMA=1)")
		}
		skipnote.Skip(t, missing)
	}
	return bin, models
}

// Available reports whether Start would find the binary and the model, and if not, why.
func Available() (ok bool, why string) {
	_, _, missing := locate()
	return missing == "", missing
}

// locate finds the binary and the model directory; missing says what is not there.
func locate() (bin, models, missing string) {
	bin = os.Getenv("TETHER_LLAMA_SERVER")
	if bin == "" {
		bin, _ = exec.LookPath("llama-server")
	}
	if bin == "" {
		if home, err := os.UserHomeDir(); err == nil {
			p := filepath.Join(home, ".cache", "tether", "llama-server-"+Version, "llama-server")
			if _, err := os.Stat(p); err == nil {
				bin = p
			}
		}
	}
	models = os.Getenv("TETHER_LLAMA_MODELS")
	if models == "" {
		models = sharedModels()
	}
	switch {
	case bin == "":
		missing = "llama-server not found: build it with `bash .ci/build-llama` (or set TETHER_LLAMA_SERVER)"
	case models == "":
		missing = "the test model aidreams260K.gguf is missing from shared/models beside the repository (or set TETHER_LLAMA_MODELS)"
	}
	return bin, models, missing
}

// sharedModels finds shared/models beside the module root (walking up from the working
// directory to go.mod), or "".
func sharedModels() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "..", "shared", "models")
			if _, err := os.Stat(filepath.Join(p, "aidreams260K.gguf")); err == nil {
				return p
			}
			return ""
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// URL is the server's base URL, e.g. "http://127.0.0.1:41234".
func (s *Server) URL() string { return "http://127.0.0.1:" + strconv.Itoa(s.port) }

// V1 is the OpenAI-compatible API base, URL()+"/v1": what -upstream takes.
func (s *Server) V1() string { return s.URL() + "/v1" }

// SlotDir is the --slot-save-path directory ("" without Options.SlotSave).
func (s *Server) SlotDir() string { return s.slotDir }

// Restart starts the server (again) on its port and waits until /health answers 200.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		s.t.Fatal("llamatest: Restart while running")
	}
	cmd := exec.Command(s.bin, s.args...)
	s.log = &logTail{}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		s.t.Fatalf("llamatest: start %s: %v", s.bin, err)
	}
	done := make(chan struct{})
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		if err := health(ctx, s.URL()); err == nil {
			return
		}
		select {
		case <-done:
			s.Stop()
			s.t.Fatalf("llamatest: llama-server exited at start; its output ends:\n%s", s.log.String())
		case <-ctx.Done():
			s.Stop()
			s.t.Fatalf("llamatest: llama-server on %s not healthy after 60 s; its output ends:\n%s", s.URL(), s.log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop kills the server and waits for it. Idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Log returns the tail of the server's output (for failure messages).
func (s *Server) Log() string { return s.log.String() }

// health asks GET /health once.
func health(ctx context.Context, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// logTail keeps the last 16 KiB written to it.
type logTail struct {
	mu  sync.Mutex
	buf []byte
}

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if n := len(l.buf); n > 16<<10 {
		l.buf = append(l.buf[:0], l.buf[n-16<<10:]...)
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(string(l.buf))
}
