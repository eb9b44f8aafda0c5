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

	// ErrParked is returned by Rollout.Steer, and (wrapped with ErrNotSuspended) by
	// Rollout.Resume, once the rollout has parked: continue it with Unpark.
	ErrParked = errors.New("sampler: rollout parked")

	// ErrNotParkable is returned by Rollout.Park when the rollout's Sink has no ParkSink or
	// its Model no Unparker.
	ErrNotParkable = errors.New("sampler: rollout cannot park")

	// ErrBadParked is wrapped by the errors of Unpark for a Parked value that does not
	// describe a suspended rollout (or that this Model cannot resume).
	ErrBadParked = errors.New("sampler: invalid parked rollout")

	// ErrNoCall is returned by Output.Arguments when no function call is open.
	ErrNoCall = errors.New("sampler: arguments without an open call")
)
