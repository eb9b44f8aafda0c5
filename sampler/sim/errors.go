package sim

import (
	"errors"

	"github.com/tetherd/tether/internal/simmeta"
)

var (
	// ErrUnknownSpeed is returned by ParseSpeed for a name that is not a preset.
	ErrUnknownSpeed = simmeta.ErrUnknownSpeed

	// ErrInjectedFailure is the error of a sim step failed on purpose (metadata "sim.fail").
	ErrInjectedFailure = errors.New("sim: injected model failure")

	// ErrBadState is wrapped by Sim.Unpark's error for a state its sessions' Park did not
	// write.
	ErrBadState = errors.New("sim: invalid parked session state")
)
