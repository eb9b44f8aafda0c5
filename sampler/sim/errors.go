package sim

import "errors"

var (
	// ErrUnknownSpeed is returned by ParseSpeed for a name that is not a preset.
	ErrUnknownSpeed = errors.New("sim: unknown speed preset")

	// ErrInjectedFailure is the error of a sim step failed on purpose (metadata "sim.fail").
	ErrInjectedFailure = errors.New("sim: injected model failure")

	// ErrBadState is wrapped by Sim.Unpark's error for a state its sessions' Park did not
	// write.
	ErrBadState = errors.New("sim: invalid parked session state")
)
