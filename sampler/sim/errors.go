package sim

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/tetherd/tether/internal/simmeta"
	"github.com/tetherd/tether/protocol"
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

// CodeContextLengthExceeded is the error code of a rollout whose context would pass the sim's
// context window (SimOptions.ContextWindow): the rollout ends failed with it. It is the code
// OpenAI's API gives an input over a model's context window, and the reason
// (protocol.ReasonContextLength) of a response the window cut short while it generated.
const CodeContextLengthExceeded = protocol.ReasonContextLength

// errWindow stops a render that would take a context past its window.
var errWindow = errors.New("sim: context window passed")

// windowError is the error of a step (or a warm-up) whose items would take the context past
// window tokens: invalid_request_error 400, CodeContextLengthExceeded, param input.
func windowError(window int) *protocol.Error {
	return &protocol.Error{Status: http.StatusBadRequest, Type: protocol.TypeInvalidRequest, Code: CodeContextLengthExceeded, Param: "input",
		Message: fmt.Sprintf("The input would take the conversation past the model's context window of %d tokens. "+
			"Shorten the input, or start from a shorter conversation (the sim's compaction keeps every token, so it does not help).", window)}
}
