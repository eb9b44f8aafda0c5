package session

import (
	"context"
	"errors"
)

// Transport carries one connection's frames. Read returns one text frame's bytes; it returns
// ErrBinaryFrame for a binary frame (the connection stays usable), ErrFrameTooLarge for a frame
// over the limit (the connection is then closed with CloseTooLarge), and any other error when
// the peer is gone. Write sends one text frame and does not retain data. Close ends the
// connection with a close handshake carrying why (the transport maps it to its own close code)
// and a short text; Abort drops the connection at once, without a close handshake (for a peer
// that does not answer or read). Write, Close and Abort are safe for concurrent use; Read is
// called from one goroutine. Package session/wstransport implements it over WebSocket.
type Transport interface {
	Read(ctx context.Context) ([]byte, error)
	Write(ctx context.Context, data []byte) error
	Close(why CloseReason, text string) error
	Abort() error
}

// CloseReason is why the server closes a connection. A transport maps it to its close code
// (WebSocket: RFC 6455 §7.4.1, as given for each reason).
type CloseReason int

const (
	// CloseNormal ends a connection that has done its work (WebSocket 1000).
	CloseNormal CloseReason = iota
	// CloseGoingAway ends a draining connection: server shutdown or the connection age limit,
	// architecture §4 (WebSocket 1001).
	CloseGoingAway
	// CloseTooLarge follows websocket_message_too_large, architecture §8 (WebSocket 1009).
	CloseTooLarge
)

// String returns the reason's name, e.g. "going_away".
func (r CloseReason) String() string {
	switch r {
	case CloseNormal:
		return "normal"
	case CloseGoingAway:
		return "going_away"
	case CloseTooLarge:
		return "too_large"
	}
	return "unknown"
}

// ErrOverloaded is returned by Read for a frame that did not fit in the server-wide Budget:
// the rest of the frame was read and discarded without being kept, and the connection stays
// usable (answer it with OverloadedError).
var ErrOverloaded = errors.New("server memory budget exhausted")
