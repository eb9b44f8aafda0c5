package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestLogModeAppendsWholeLines(t *testing.T) {
	var b bytes.Buffer
	l := New(&b, "bench")
	l.Show("phase one", true)
	for i := 0; i < 1000; i++ {
		l.Show("step", false) // within LogEvery of the forced line: not shown
	}
	l.Show("phase two", true)
	l.Done()
	out := b.String()
	if strings.Contains(out, "\r") {
		t.Fatalf("a log got carriage returns: %q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[0], "phase one") || !strings.HasSuffix(lines[1], "phase two") ||
		!strings.HasPrefix(lines[2], "bench done in ") {
		t.Fatalf("lines = %q", lines)
	}
}

func TestNilShowsNothing(t *testing.T) {
	l := New(nil, "soak")
	l.Show("x", true)
	l.Done()
}

func TestIsTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) || IsTerminal(&bytes.Buffer{}) {
		t.Fatal("a regular file or a buffer is not a terminal")
	}
}
