package llamatest

import (
	"bytes"
	"context"
	"fmt"
	"io"
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
	log  *LogTail
}

// Start starts a llama-server for t with opts and stops it in t.Cleanup. It skips the test
// (fails it with TETHER_REQUIRE_LLAMA=1) when the binary or the model is missing.
func Start(t *testing.T, opts Options) *Server {
	t.Helper()
	bin, models := Find(t, engine)
	slots := max(opts.Slots, 1)
	ctxn := opts.SlotContext
	if ctxn <= 0 {
		ctxn = 2048
	}
	s := &Server{t: t, bin: bin} // port 0: the first start binds a free port and reports it
	s.args = []string{
		"-m", filepath.Join(models, "aidreams260K.gguf"),
		"--host", "127.0.0.1",
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

// engine is how Start finds llama-server.
var engine = Engine{Name: "llama-server", Env: "TETHER_LLAMA_SERVER", Cache: "llama-server-" + Version,
	Build: ".ci/build-llama", Require: "TETHER_REQUIRE_LLAMA"}

// URL is the server's base URL, e.g. "http://127.0.0.1:41234".
func (s *Server) URL() string { return "http://127.0.0.1:" + strconv.Itoa(s.port) }

// V1 is the OpenAI-compatible API base, URL()+"/v1": what -upstream takes.
func (s *Server) V1() string { return s.URL() + "/v1" }

// SlotDir is the --slot-save-path directory ("" without Options.SlotSave).
func (s *Server) SlotDir() string { return s.slotDir }

// Restart starts the server (again) on its port and waits until /health answers 200. The
// first start (from Start) passes --port 0: llama-server binds a free port itself and reports
// it, so no other process can take the port between its choice and the bind.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		s.t.Fatal("llamatest: Restart while running")
	}
	cmd := exec.Command(s.bin, append(s.args, "--port", strconv.Itoa(s.port))...)
	s.log = &LogTail{}
	out, reported := WatchPort(s.log, "listening on http://127.0.0.1:")
	cmd.Stdout, cmd.Stderr = out, out
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
	if s.port == 0 {
		select {
		case s.port = <-reported:
		case <-done:
			s.Stop()
			s.t.Fatalf("llamatest: llama-server exited at start; its output ends:\n%s", s.log.String())
		case <-ctx.Done():
			s.Stop()
			s.t.Fatalf("llamatest: llama-server did not report its port within 60 s; its output ends:\n%s", s.log.String())
		}
	}
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

// SetSlots changes the server's slot count (-np, the Options.Slots of Start; each slot keeps
// its context) for its next Restart, as an operator restarting the engine with another -np
// does. It fails t when n < 1.
func (s *Server) SetSlots(n int) {
	s.t.Helper()
	if n < 1 {
		s.t.Fatalf("llamatest: SetSlots(%d): want at least 1", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var np, c int
	for i := 0; i+1 < len(s.args); i++ {
		switch s.args[i] {
		case "-np":
			np = i + 1
		case "-c":
			c = i + 1
		}
	}
	old, _ := strconv.Atoi(s.args[np])
	total, _ := strconv.Atoi(s.args[c])
	s.args[np], s.args[c] = strconv.Itoa(n), strconv.Itoa(total/old*n)
}

// WatchPort returns a writer that passes an engine's output on to w, and a channel that gets
// (once) the port on the first output line that has prefix right before it: how a test reads
// the port an engine started on port 0 bound, e.g. prefix "listening on http://127.0.0.1:".
func WatchPort(w io.Writer, prefix string) (io.Writer, <-chan int) {
	l := &portWatch{w: w, prefix: prefix, port: make(chan int, 1)}
	return l, l.port
}

// portWatch is the writer of WatchPort.
type portWatch struct {
	w      io.Writer
	prefix string
	mu     sync.Mutex
	line   []byte // the unfinished last line, until the port is found
	sent   bool
	port   chan int
}

func (l *portWatch) Write(p []byte) (int, error) {
	l.mu.Lock()
	if !l.sent {
		l.line = append(l.line, p...)
		for {
			i := bytes.IndexByte(l.line, '\n')
			if i < 0 {
				break
			}
			if port, ok := portAfter(string(l.line[:i]), l.prefix); ok {
				l.sent, l.line = true, nil
				l.port <- port
				break
			}
			l.line = l.line[i+1:]
		}
	}
	l.mu.Unlock()
	return l.w.Write(p)
}

// portAfter reads the decimal port right after prefix in line.
func portAfter(line, prefix string) (int, bool) {
	_, rest, ok := strings.Cut(line, prefix)
	if !ok {
		return 0, false
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	port, err := strconv.Atoi(rest[:n])
	return port, err == nil && port > 0
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

// Signal sends sig to the running server: syscall.SIGSTOP stalls it (connections are
// accepted by the kernel, nothing is answered), syscall.SIGCONT resumes it. It fails t when
// the server is not running.
func (s *Server) Signal(sig os.Signal) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatal("llamatest: Signal while stopped")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("llamatest: signal %v: %v", sig, err)
	}
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
