package chat

import (
	"fmt"
	"time"

	"github.com/tetherd/tether/sampler"
)

// Defaults of the Options bounds on what the engine streams.
const (
	defaultStepTimeout      = 30 * time.Minute
	defaultMaxEventBytes    = 4 << 20
	defaultMaxStepBytes     = 32 << 20
	defaultMaxArgumentBytes = 16 << 20
)

// limits are the Options bounds with their defaults applied.
type limits struct {
	stepTimeout                     time.Duration
	eventBytes, stepBytes, argBytes int
	outputTokens                    int // the server's bound (0: none)
}

// limits returns the model's bounds on one step's stream.
func (m *Model) limits() limits {
	l := limits{m.opts.StepTimeout, m.opts.MaxEventBytes, m.opts.MaxStepBytes, m.opts.MaxArgumentBytes, m.opts.MaxOutputTokens}
	if l.stepTimeout <= 0 {
		l.stepTimeout = defaultStepTimeout
	}
	if l.eventBytes <= 0 {
		l.eventBytes = defaultMaxEventBytes
	}
	if l.stepBytes <= 0 {
		l.stepBytes = defaultMaxStepBytes
	}
	if l.argBytes <= 0 {
		l.argBytes = defaultMaxArgumentBytes
	}
	switch {
	case l.outputTokens == 0:
		l.outputTokens = sampler.DefaultMaxOutputTokens
	case l.outputTokens < 0:
		l.outputTokens = 0
	}
	return l
}

// stepTimeoutError is the cause of a step cut by Options.StepTimeout.
type stepTimeoutError struct{ d time.Duration }

func (e *stepTimeoutError) Error() string {
	return fmt.Sprintf("the upstream engine streamed one step for longer than %v (-upstream-step-timeout)", e.d)
}

// byteSize writes n bytes in the largest binary unit that divides it.
func byteSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
