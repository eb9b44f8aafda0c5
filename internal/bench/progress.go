package bench

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/tetherd/tether/internal/progress"
)

// benchProgress is bench's progress display (see package progress: one rewritten line on a
// terminal, a line every few seconds in a log).
type benchProgress struct {
	line  *progress.Line
	start time.Time // when the run began, shown or not
}

func newProgress(w io.Writer) *benchProgress {
	return &benchProgress{line: progress.New(w, "bench"), start: time.Now()}
}

func (p *benchProgress) set(format string, args ...any) {
	p.line.Show(fmt.Sprintf(format, args...), true)
}

func (p *benchProgress) turn(transport string, rollout, rollouts, turn, turns int) {
	if p.line == nil {
		return
	}
	what := fmt.Sprintf("rollout %d/%d", rollout+1, rollouts)
	if rollout < 0 {
		what = "warm-up"
	}
	p.line.Show(fmt.Sprintf("%-9s %s  turn %3d/%d", transport, what, turn, turns), turn == 1)
}

// ticker refreshes the line with msg() every 200ms until the returned stop is called.
func (p *benchProgress) ticker(msg func() string) (stop func()) {
	if p.line == nil {
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
			p.line.Show(msg(), false)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// done ends the display with "bench done in …".
func (p *benchProgress) done() { p.line.Done() }
