package responses

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// socket is one upstream WebSocket with its reader goroutine. The reader reads all the time,
// also while the connection's rollouts are suspended, so that the upstream's pings are
// answered (coder/websocket handles control frames only inside Read) and an idle socket is
// not dropped as a dead peer. Frames wait in frames until a step takes them.
type socket struct {
	c      *websocket.Conn
	frames chan frame
	done   chan struct{} // closed by close: the reader stops
	once   sync.Once
}

// frame is one message from the reader, or the error that ended it.
type frame struct {
	typ  websocket.MessageType
	data []byte
	err  error
}

// errSilent is the error of a read that waited longer than the silence timeout.
var errSilent = errors.New("upstream silent")

func newSocket(c *websocket.Conn) *socket {
	s := &socket{c: c, frames: make(chan frame, 16), done: make(chan struct{})}
	go s.read()
	return s
}

// read runs until the socket fails or is closed; its last frame carries the error.
func (s *socket) read() {
	for {
		typ, data, err := s.c.Read(context.Background())
		select {
		case s.frames <- frame{typ: typ, data: data, err: err}:
		case <-s.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// next returns the next frame, ctx's cause when it ends first, or errSilent after timeout.
func (s *socket) next(ctx context.Context, timeout time.Duration) frame {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case f := <-s.frames:
		return f
	case <-ctx.Done():
		return frame{err: context.Cause(ctx)}
	case <-t.C:
		return frame{err: errSilent}
	case <-s.done:
		return frame{err: errClosed}
	}
}

// errClosed is the error of a read from a socket the backend closed.
var errClosed = errors.New("upstream socket closed")

// write sends one text frame within timeout.
func (s *socket) write(ctx context.Context, timeout time.Duration, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return s.c.Write(ctx, websocket.MessageText, data)
}

// close closes the socket at once (no closing handshake: the backend does not wait) and stops
// the reader.
func (s *socket) close() {
	s.once.Do(func() {
		close(s.done)
		_ = s.c.CloseNow()
	})
}
