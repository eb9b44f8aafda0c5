package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/internal/skipnote"
)

// TestMain checks that no test leaves a goroutine running (servers, clients, signal handling),
// and removes the binary that buildTether built for the package's tests.
func TestMain(m *testing.M) {
	code := skipnote.M(m, "cmd/tether").Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// built is the binary of ./cmd/tether, built once for the package's tests.
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// buildTether builds ./cmd/tether once per test run and returns the binary's path.
func buildTether(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "tether-test-bin"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "tether")
		if out, err := exec.Command("go", "build", "-o", built.bin, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}
