package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Default intervals between two lines shown without force.
const (
	TerminalEvery = 100 * time.Millisecond // rewriting a terminal line
	LogEvery      = 5 * time.Second        // appending a line to a file or pipe
)

// Line is one progress display. Its methods are safe for concurrent use; a nil *Line or one
// made with a nil writer shows nothing.
type Line struct {
	w      io.Writer
	prefix string
	tty    bool
	every  time.Duration
	start  time.Time

	mu    sync.Mutex // guards the fields below
	last  time.Time
	width int // length of the line on a terminal, 0 when none is shown
}

// New returns a Line on w whose lines start with prefix and the time since New. The mode
// (rewritten or appended lines) follows whether w is a terminal.
func New(w io.Writer, prefix string) *Line {
	if w == nil {
		return nil
	}
	tty := IsTerminal(w)
	every := LogEvery
	if tty {
		every = TerminalEvery
	}
	return &Line{w: w, prefix: prefix, tty: tty, every: every, start: time.Now()}
}

// IsTerminal reports whether w is an *os.File open on a character device.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Show shows s unless a line was shown less than the mode's interval ago; force shows it
// anyway (use it for a change of phase, not for every step).
func (l *Line) Show(s string, force bool) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if !force && !l.last.IsZero() && now.Sub(l.last) < l.every {
		return
	}
	l.last = now
	line := fmt.Sprintf("%s %5.1fs  %s", l.prefix, now.Sub(l.start).Seconds(), s)
	if !l.tty {
		fmt.Fprintln(l.w, line)
		return
	}
	pad := ""
	if n := l.width - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	l.width = len(line)
	fmt.Fprint(l.w, "\r"+line+pad)
}

// Done clears a terminal line and prints "<prefix> done in <seconds>s".
func (l *Line) Done() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.width > 0 {
		fmt.Fprintf(l.w, "\r%s\r", strings.Repeat(" ", l.width))
		l.width = 0
	}
	fmt.Fprintf(l.w, "%s done in %.1fs\n", l.prefix, time.Since(l.start).Seconds())
}
