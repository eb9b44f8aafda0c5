package session

import (
	"context"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Admission is a server-wide gate on sampling steps (issue: backends, -max-sampling): at most
// N rollouts of all connections sample at once; the others wait, in FIFO order, after they
// got their connection's sampling slot. It composes with the per-connection FIFO queue: a
// rollout first holds its connection's slot, then an admission. An upstream engine has a
// fixed parallelism (llama.cpp slots, vLLM's max-num-seqs, Ollama's OLLAMA_NUM_PARALLEL); past
// it the engine queues requests where no one can see them, so Tether queues them here and
// reports the queue in /metrics. A nil *Admission admits everyone at once.
type Admission struct {
	sem *semaphore.Weighted
	max int
	// Waiting is the number of rollouts waiting for an admission now (gauge); Running the
	// number admitted (gauge); WaitNanos the total time spent waiting, in nanoseconds
	// (counter).
	Waiting, Running, WaitNanos atomic.Int64
}

// NewAdmission returns an Admission of max concurrent sampling steps, or nil (no bound) when
// max <= 0.
func NewAdmission(max int) *Admission {
	if max <= 0 {
		return nil
	}
	return &Admission{sem: semaphore.NewWeighted(int64(max)), max: max}
}

// Max returns the bound (0 for a nil Admission: none).
func (a *Admission) Max() int {
	if a == nil {
		return 0
	}
	return a.max
}

// acquire waits for an admission or for ctx to end (then it returns ctx.Err()).
func (a *Admission) acquire(ctx context.Context) error {
	if a == nil {
		return nil
	}
	if a.sem.TryAcquire(1) {
		a.Running.Add(1)
		return nil
	}
	a.Waiting.Add(1)
	start := time.Now()
	err := a.sem.Acquire(ctx, 1)
	a.Waiting.Add(-1)
	a.WaitNanos.Add(int64(time.Since(start)))
	if err == nil {
		a.Running.Add(1)
	}
	return err
}

func (a *Admission) release() {
	if a == nil {
		return
	}
	a.Running.Add(-1)
	a.sem.Release(1)
}

// Acquire waits for an admission or for ctx to end (then it returns ctx.Err()), for a
// sampling step that does not run on a rollout of this package (POST /v1/chat/completions).
// Release it with Release. A nil *Admission admits at once.
func (a *Admission) Acquire(ctx context.Context) error { return a.acquire(ctx) }

// Release gives back an admission of Acquire.
func (a *Admission) Release() { a.release() }
