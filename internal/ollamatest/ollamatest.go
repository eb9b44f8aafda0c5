package ollamatest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/llamatest"
)

// Version is the Ollama release .ci/build-ollama builds.
const Version = "v0.17.4"

// Model is the name the test model is created under; Ollama lists it as Model+":latest" and
// serves requests naming either.
const Model = "aidreams"

// template is the model's chat template (Ollama's Go template syntax): ChatML-style turns.
// The GGUF has none of its own.
const template = `{{- range .Messages }}<|im_start|>{{ .Role }}
{{ .Content }}<|im_end|>
{{ end }}<|im_start|>assistant
`

// Options configure a Server. The zero value is one parallel request of 2,048 tokens.
type Options struct {
	// Context is the model's context in tokens (num_ctx, and the context_length written into
	// the server's copy of the GGUF); 0 means 2048.
	Context int
	// Parallel is OLLAMA_NUM_PARALLEL, the requests the loaded model serves at once; 0 means 1.
	Parallel int
}

// Server is an `ollama serve` process owned by a test, with the test model created in it.
type Server struct {
	t    *testing.T
	bin  string
	dir  string // HOME and OLLAMA_MODELS live here
	port int

	mu   sync.Mutex // guards cmd and done
	cmd  *exec.Cmd
	done chan struct{}
	log  *llamatest.LogTail
}

// Start starts `ollama serve` for t with opts, creates Model in it from the test model and
// loads it, and stops the server in t.Cleanup. It skips the test (fails it with
// TETHER_REQUIRE_OLLAMA=1) when the binary or the model is missing.
func Start(t *testing.T, opts Options) *Server {
	t.Helper()
	bin, models := llamatest.Find(t, engine)
	ctxn := opts.Context
	if ctxn <= 0 {
		ctxn = 2048
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir()} // port 0: the server binds a free port and reports it
	gguf := filepath.Join(s.dir, "aidreams.gguf")
	b, err := os.ReadFile(filepath.Join(models, "aidreams260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err = setUint32(b, "llama.context_length", uint32(ctxn)); err != nil {
		t.Fatalf("ollamatest: %v", err)
	}
	if err := os.WriteFile(gguf, b, 0o644); err != nil {
		t.Fatal(err)
	}
	modelfile := filepath.Join(s.dir, "Modelfile")
	mf := fmt.Sprintf("FROM %s\nTEMPLATE \"\"\"%s\"\"\"\nPARAMETER num_ctx %d\nPARAMETER num_thread 1\n", gguf, template, ctxn)
	if err := os.WriteFile(modelfile, []byte(mf), 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "serve")
	cmd.Env = s.env(
		"OLLAMA_MODELS="+filepath.Join(s.dir, "models"),
		"OLLAMA_NUM_PARALLEL="+strconv.Itoa(max(opts.Parallel, 1)),
		"OLLAMA_MAX_LOADED_MODELS=1",
		"OLLAMA_KEEP_ALIVE=1h",
		"OLLAMA_NO_CLOUD=1", // local models only
	)
	s.log = &llamatest.LogTail{}
	out, reported := llamatest.WatchPort(s.log, "Listening on 127.0.0.1:")
	cmd.Stdout, cmd.Stderr = out, out
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("ollamatest: start %s: %v", bin, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	done := s.done
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(s.Stop)
	s.waitPort(reported)
	s.waitUp()

	create := exec.Command(bin, "create", Model, "-f", modelfile)
	create.Env = s.env()
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("ollamatest: ollama create: %v\n%s\nserver output ends:\n%s", err, out, s.log.String())
	}
	// An empty generate loads the model, so that a failure to load shows here.
	s.post("/api/generate", `{"model":"`+Model+`"}`)
	return s
}

// env returns the environment for the server and the CLI: the test's, without its OLLAMA_*
// settings, with HOME in the server's directory (Ollama keeps its key there), OLLAMA_HOST on
// the server's port, and extra.
func (s *Server) env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OLLAMA_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+s.dir, "OLLAMA_HOST=127.0.0.1:"+strconv.Itoa(s.port))
	return append(env, extra...)
}

// waitPort waits for the port the server reports having bound (it was started on port 0, so
// no other process can take the port between its choice and the bind).
func (s *Server) waitPort(reported <-chan int) {
	s.t.Helper()
	select {
	case s.port = <-reported:
	case <-s.done:
		s.t.Fatalf("ollamatest: ollama serve exited at start; its output ends:\n%s", s.log.String())
	case <-time.After(60 * time.Second):
		s.t.Fatalf("ollamatest: ollama serve did not report its port within 60 s; its output ends:\n%s", s.log.String())
	}
}

// waitUp waits until GET / answers 200 ("Ollama is running").
func (s *Server) waitUp() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-s.done:
			s.t.Fatalf("ollamatest: ollama serve exited at start; its output ends:\n%s", s.log.String())
		case <-ctx.Done():
			s.t.Fatalf("ollamatest: ollama on %s not up after 60 s; its output ends:\n%s", s.URL(), s.log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// post POSTs body to the server's path and fails the test unless it answers 200.
func (s *Server) post(path, body string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("ollamatest: POST %s: %v\nserver output ends:\n%s", path, err, s.log.String())
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("ollamatest: POST %s: %d %s\nserver output ends:\n%s", path, resp.StatusCode, out.String(), s.log.String())
	}
}

// URL is the server's base URL, e.g. "http://127.0.0.1:41234".
func (s *Server) URL() string { return "http://127.0.0.1:" + strconv.Itoa(s.port) }

// V1 is the OpenAI-compatible API base, URL()+"/v1": what -upstream takes.
func (s *Server) V1() string { return s.URL() + "/v1" }

// Stop kills the server and the model runners it started, and waits for the server. Idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	killGroup(cmd)
	<-done
}

// Log returns the tail of the server's output (for failure messages).
func (s *Server) Log() string { return s.log.String() }

// engine is how Start finds Ollama.
var engine = llamatest.Engine{Name: "ollama", Env: "TETHER_OLLAMA", Cache: "ollama-" + Version,
	Build: ".ci/build-ollama", Require: "TETHER_REQUIRE_OLLAMA"}
