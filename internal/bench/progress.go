package bench

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress is the one-line progress display on stderr: rewritten in place with \r, at most
// ten times a second, and ended with a newline.
type progress struct {
	w     io.Writer
	start time.Time

	mu    sync.Mutex // guards the fields below
	last  time.Time
	width int
	line  string
}

func newProgress(w io.Writer) *progress { return &progress{w: w, start: time.Now()} }

func (p *progress) set(format string, args ...any) {
	p.show(fmt.Sprintf(format, args...), true)
}

func (p *progress) turn(transport string, rollout, rollouts, turn, turns int) {
	if p.w == nil {
		return
	}
	what := fmt.Sprintf("rollout %d/%d", rollout+1, rollouts)
	if rollout < 0 {
		what = "warm-up"
	}
	p.show(fmt.Sprintf("%-9s %s  turn %3d/%d", transport, what, turn, turns), turn == 1)
}

func (p *progress) show(s string, force bool) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if !force && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	line := fmt.Sprintf("bench %5.1fs  %s", now.Sub(p.start).Seconds(), s)
	pad := ""
	if n := p.width - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	p.width = len(line)
	p.line = line
	fmt.Fprint(p.w, "\r"+line+pad)
}

// ticker refreshes the line with msg() every 200ms until the returned stop is called.
func (p *progress) ticker(msg func() string) (stop func()) {
	if p.w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			p.show(msg(), true)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// done ends the line.
func (p *progress) done() {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.width > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
		p.width = 0
	}
	fmt.Fprintf(p.w, "bench done in %.1fs\n", time.Since(p.start).Seconds())
}
