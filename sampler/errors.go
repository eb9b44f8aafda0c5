package sampler

import "errors"

var (
	// ErrNotSuspended is returned by Rollout.Resume when the rollout is not waiting for input:
	// it is queued, sampling, being resumed by another call, or has ended (then the error also
	// matches ErrEnded).
	ErrNotSuspended = errors.New("sampler: rollout not suspended")

	// ErrEnded is returned (wrapped with ErrNotSuspended) by Rollout.Resume after the rollout
	// has ended.
	ErrEnded = errors.New("sampler: rollout ended")

	// ErrCancelled is the cause of a rollout's context after Rollout.Cancel; Output methods
	// return an error wrapping it while the rollout is being cancelled.
	ErrCancelled = errors.New("sampler: rollout cancelled")

	// ErrNoCall is returned by Output.Arguments when no function call is open.
	ErrNoCall = errors.New("sampler: arguments without an open call")
)
