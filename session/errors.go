package session

import (
	"errors"
	"net/http"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/session/store"
)

// DefaultMaxFrame is the default largest client frame: 32 MiB.
const DefaultMaxFrame = 32 << 20

var (
	// ErrBinaryFrame is returned by Transport.Read for a binary frame; the connection answers
	// unsupported_frame and stays usable.
	ErrBinaryFrame = errors.New("session: binary frame")
	// ErrFrameTooLarge is returned by Transport.Read for a frame over the limit; the connection
	// answers websocket_message_too_large and closes with 1009.
	ErrFrameTooLarge = errors.New("session: frame too large")
	// ErrClosed is returned by Conn methods after the connection has closed.
	ErrClosed = errors.New("session: connection closed")
)

// PreviousNotFound is the previous_response_not_found error (400, param
// previous_response_id) of a continuation of id whose chain lookup failed with err (nil when
// id is not known at all): it names the response that is missing, id itself or the ancestor
// that a store's *store.MissingError names.
func PreviousNotFound(id string, err error) *protocol.Error {
	if m := store.MissingID(err, id); m != id {
		return protocol.Errorf(http.StatusBadRequest, protocol.CodePreviousNotFound, "previous_response_id",
			"Previous response with id '%s' cannot be continued: response '%s' of its chain was not found (it expired, was evicted or was deleted).", id, m)
	}
	return protocol.Errorf(http.StatusBadRequest, protocol.CodePreviousNotFound, "previous_response_id",
		"Previous response with id '%s' not found.", id)
}

func notFoundError(key string) *protocol.Error {
	return protocol.Errorf(http.StatusNotFound, protocol.CodeResponseNotFound, "response_id", "No response with id '%s' on this connection.", key)
}

func notSuspendedError(key string, s sampler.State) *protocol.Error {
	return protocol.Errorf(http.StatusConflict, protocol.CodeResponseNotSuspended, "response_id", "Response %s is not suspended (it is %s).", key, s)
}

func alreadyEndedError(key string) *protocol.Error {
	return protocol.Errorf(http.StatusConflict, protocol.CodeAlreadyCompleted, "response_id", "Response %s has already ended.", key)
}

func queueFullError(depth int) *protocol.Error {
	return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeQueueLimit, "",
		"Too many queued requests on this connection (at most %d wait behind the sampling response).", depth)
}

// StoreUnavailable is the store_unavailable error (503, type server_error) of a lookup the
// store failed or did not answer in time (the store logs the cause).
func StoreUnavailable() *protocol.Error {
	return &protocol.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeServer, Code: protocol.CodeStoreUnavailable,
		Message: "The store of stored responses is unavailable: try again later."}
}

// StoreFailed is response.error of a store:true response that ends response.failed because
// the store did not accept it (durability before acknowledgement).
func StoreFailed() *protocol.ResponseError {
	return &protocol.ResponseError{Code: protocol.CodeStoreUnavailable,
		Message: "The response could not be stored (store:true): the store is unavailable. Try again, or send the full input."}
}

func shuttingDownError() *protocol.Error {
	return &protocol.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeServer, Code: protocol.CodeShuttingDown,
		Message: "The connection is closing; open a new connection to continue."}
}
