package session

import (
	"context"
	"errors"

	"github.com/tetherd/tether/protocol"
)

// Transport carries one connection's frames. Read returns one text frame's bytes; it returns
// ErrBinaryFrame for a binary frame (the connection stays usable), ErrFrameTooLarge for a frame
// over the limit (the connection is then closed with 1009), and any other error when the peer
// is gone. Write sends one text frame and does not retain data. Close ends the connection with
// a close handshake carrying the close code (protocol.CloseCode: the wire's codes, not a
// WebSocket library's type) and a short reason; Abort drops the connection at once, without a close handshake (for a peer
// that does not answer or read). Write, Close and Abort are safe for concurrent use; Read is
// called from one goroutine. Package session/wstransport implements it over WebSocket.
type Transport interface {
	Read(ctx context.Context) ([]byte, error)
	Write(ctx context.Context, data []byte) error
	Close(code protocol.CloseCode, reason string) error
	Abort() error
}

// ErrOverloaded is returned by Read for a frame that did not fit in the server-wide Budget:
// the rest of the frame was read and discarded without being kept, and the connection stays
// usable (answer it with OverloadedError).
var ErrOverloaded = errors.New("server memory budget exhausted")
