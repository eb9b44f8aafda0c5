package llamatest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tetherd/tether/internal/skipnote"
)

// Engine says how a test finds an engine binary (llama-server here, Ollama in ollamatest).
type Engine struct {
	Name    string // the binary's name on PATH, e.g. "llama-server"
	Env     string // the variable holding its path, e.g. "TETHER_LLAMA_SERVER"
	Cache   string // its directory under ~/.cache/tether, e.g. "llama-server-3.21.1"
	Build   string // the script that builds it, e.g. ".ci/build-llama"
	Require string // the variable that, set to 1, makes a missing engine a failure
}

// Find returns e's binary ($Env, else Name on PATH, else the one its build script cached) and
// the test model's directory ($TETHER_LLAMA_MODELS, else shared/models beside the module root).
// When either is missing it skips t with a skipnote line, or fails it when $Require is 1.
func Find(t testing.TB, e Engine) (bin, models string) {
	t.Helper()
	bin = os.Getenv(e.Env)
	if bin == "" {
		bin, _ = exec.LookPath(e.Name)
	}
	if bin == "" {
		if home, err := os.UserHomeDir(); err == nil {
			if p := filepath.Join(home, ".cache", "tether", e.Cache, e.Name); exists(p) {
				bin = p
			}
		}
	}
	models = ModelsDir()
	var missing string
	switch {
	case bin == "":
		missing = e.Name + " not found: build it with `bash " + e.Build + "` (or set " + e.Env + ")"
	case models == "":
		missing = "the test model aidreams260K.gguf is missing from shared/models beside the repository (or set TETHER_LLAMA_MODELS)"
	}
	if missing != "" {
		if os.Getenv(e.Require) == "1" {
			t.Fatal(missing + " (" + e.Require + "=1)")
		}
		skipnote.Skip(t, missing)
	}
	return bin, models
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// ModelsDir returns the test model's directory: $TETHER_LLAMA_MODELS, else shared/models
// beside the module root; "" when neither is there.
func ModelsDir() string {
	if d := os.Getenv("TETHER_LLAMA_MODELS"); d != "" {
		return d
	}
	return sharedModels()
}

// sharedModels finds shared/models beside the module root (walking up from the working
// directory to go.mod), or "".
func sharedModels() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if exists(filepath.Join(dir, "go.mod")) {
			p := filepath.Join(dir, "..", "shared", "models")
			if exists(filepath.Join(p, "aidreams260K.gguf")) {
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

// LogTail keeps the last 16 KiB written to it: an engine's output, for failure messages. Safe
// for concurrent use.
type LogTail struct {
	mu  sync.Mutex
	buf []byte
}

func (l *LogTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if n := len(l.buf); n > 16<<10 {
		l.buf = append(l.buf[:0], l.buf[n-16<<10:]...)
	}
	return len(p), nil
}

// String returns the kept tail, trimmed.
func (l *LogTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(string(l.buf))
}
