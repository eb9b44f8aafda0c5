package session

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/coder/websocket"
)

// Transport carries one connection's frames. Read returns one text frame's bytes; it returns
// ErrBinaryFrame for a binary frame (the connection stays usable), ErrFrameTooLarge for a frame
// over the limit (the connection must then be closed with StatusMessageTooBig), and any other
// error when the peer is gone. Write sends one text frame and does not retain data. Close sends
// a close frame with the code and reason; Abort drops the connection at once, without a close
// handshake (for a peer that does not answer or read). Write, Close and Abort are safe for
// concurrent use; Read is called from one goroutine.
type Transport interface {
	Read(ctx context.Context) ([]byte, error)
	Write(ctx context.Context, data []byte) error
	Close(code websocket.StatusCode, reason string) error
	Abort() error
}

// wsTransport is the Transport over a coder/websocket connection. The library's own read
// limit is disabled: it would close with 1009 before the error frame of architecture §8 could
// be sent, so frames are read through an io.LimitReader of maxFrame+1 bytes instead.
type wsTransport struct {
	c        *websocket.Conn
	maxFrame int64
	buf      []byte // owned by the reading goroutine
}

// NewWebSocketTransport wraps an accepted WebSocket connection. maxFrame is the largest client
// frame in bytes (architecture §10 -max-frame); 0 means 32 MiB.
func NewWebSocketTransport(c *websocket.Conn, maxFrame int64) Transport {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	c.SetReadLimit(-1)
	return &wsTransport{c: c, maxFrame: maxFrame}
}

func (t *wsTransport) Read(ctx context.Context) ([]byte, error) {
	typ, r, err := t.c.Reader(ctx)
	if err != nil {
		return nil, err
	}
	t.buf = t.buf[:0]
	t.buf, err = readAll(t.buf, io.LimitReader(r, t.maxFrame+1))
	if err != nil {
		return nil, err
	}
	if int64(len(t.buf)) > t.maxFrame {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrFrameTooLarge, t.maxFrame)
	}
	if typ != websocket.MessageText {
		return nil, ErrBinaryFrame
	}
	if cap(t.buf) > 1<<20 && len(t.buf) < 1<<16 {
		t.buf = nil // don't pin a large buffer after one large frame
	}
	return t.buf, nil
}

func readAll(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

func (t *wsTransport) Write(ctx context.Context, data []byte) error {
	return t.c.Write(ctx, websocket.MessageText, data)
}

func (t *wsTransport) Close(code websocket.StatusCode, reason string) error {
	return t.c.Close(code, reason)
}

// Ping sends a protocol ping and waits for the pong (the connection's read loop receives it).
func (t *wsTransport) Ping(ctx context.Context) error { return t.c.Ping(ctx) }

func (t *wsTransport) Abort() error { return t.c.CloseNow() }
