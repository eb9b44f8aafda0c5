// Package skipnote makes a skipped integration suite visible in the default output of
// go test ./...: one line per package, such as
//
//	deploy: integration tests SKIPPED: nginx not found (set TETHER_NGINX)
//
// A test calls [Skip] instead of t.Skip when something the suite needs (redis-server, nginx,
// Chromium, the Node clients) is missing, and the package's TestMain runs the tests through
// [M]. The callers keep their CI switch: with TETHER_REQUIRE_<THING>=1 they fail instead of
// calling Skip.
//
// go test prints nothing but "ok" for a passing package when it is given package arguments
// (its output is kept only for -v or a failure), so the line goes the line to the go command's
// own standard error when that is a terminal or a pipe (never a regular file, whose offset the
// go command owns), and to the test binary's standard error otherwise. A run that skipped is
// not cached, so the line comes again on the next run rather than a silent "ok (cached)".
package skipnote

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var (
	mu      sync.Mutex
	reasons []string // distinct, in the order first seen
)

// Skip records reason (what is missing and how to provide it, e.g. "nginx not found (set
// TETHER_NGINX)") for the package's line and skips t with it.
func Skip(t testing.TB, reason string) {
	t.Helper()
	mu.Lock()
	if !slices.Contains(reasons, reason) {
		reasons = append(reasons, reason)
	}
	mu.Unlock()
	uncached()
	t.Skip("integration test SKIPPED: " + reason)
}

// M wraps m for TestMain: its Run runs the tests and then, when some skipped through [Skip],
// writes the package's line; pkg names the package in it (e.g. "deploy"). Use it as
// os.Exit(skipnote.M(m, "deploy").Run()) or goleak.VerifyTestMain(skipnote.M(m, "deploy")).
func M(m *testing.M, pkg string) Runner { return Runner{m: m, pkg: pkg} }

// Runner is the [testing.M] wrapper that [M] returns.
type Runner struct {
	m   *testing.M
	pkg string
}

// Run runs the tests, writes the package's line if some skipped, and returns m.Run's code.
func (r Runner) Run() int {
	code := r.m.Run()
	if line := Line(r.pkg); line != "" {
		w, closeW := output()
		fmt.Fprintln(w, line)
		closeW()
	}
	return code
}

// Line is the package's line, "" when nothing was skipped through [Skip].
func Line(pkg string) string {
	mu.Lock()
	defer mu.Unlock()
	if len(reasons) == 0 {
		return ""
	}
	return pkg + ": integration tests SKIPPED: " + strings.Join(reasons, "; ")
}

// output is the go command's standard error when the parent process is the go command and
// that stream is a terminal or a pipe; otherwise this process's standard error.
func output() (io.Writer, func()) {
	ppid := os.Getppid()
	exe, err := os.Readlink("/proc/" + strconv.Itoa(ppid) + "/exe")
	if err != nil || filepath.Base(exe) != "go" {
		return os.Stderr, func() {}
	}
	f, err := os.OpenFile("/proc/"+strconv.Itoa(ppid)+"/fd/2", os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return os.Stderr, func() {}
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeCharDevice|os.ModeNamedPipe|os.ModeSocket) == 0 {
		f.Close()
		return os.Stderr, func() {}
	}
	return f, func() { f.Close() }
}

// uncached opens a file written just now inside the module (go test checks only files under
// the module root): go test does not cache a run that read a file younger than two seconds,
// so a skipped suite is reported again on the next run. The file, .skipnote at the module
// root, is ignored by git. Nothing happens when the module root cannot be found or written.
func uncached() {
	dir, err := os.Getwd()
	if err != nil {
		return
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return
		}
		dir = parent
	}
	name := filepath.Join(dir, ".skipnote")
	if err := os.WriteFile(name, []byte("written by a test that skipped for a missing dependency\n"), 0o644); err != nil {
		return
	}
	if f, err := os.Open(name); err == nil {
		f.Close()
	}
}
