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
// not dropped as a dead peer. Frames wait in frames until a step takes them; once they hold
// limit bytes, the reader reads no further until a step takes one (so an upstream that streams
// faster than a step decodes costs at most about twice the frame limit).
type socket struct {
	c      *websocket.Conn
	frames chan frame
	done   chan struct{} // closed by close: the reader stops
	once   sync.Once
	limit  int64
	room   chan struct{} // signalled (capacity 1) when a step took a frame

	mu   sync.Mutex
	held int64 // guarded by mu: bytes of the frames in frames
}

// frame is one message from the reader, or the error that ended it.
type frame struct {
	typ  websocket.MessageType
	data []byte
	err  error
}

// errSilent is the error of a read that waited longer than the silence timeout.
var errSilent = errors.New("upstream silent")

// newSocket starts the reader of c, which holds up to limit bytes of frames no step took yet.
func newSocket(c *websocket.Conn, limit int64) *socket {
	s := &socket{c: c, frames: make(chan frame, 16), done: make(chan struct{}), limit: limit, room: make(chan struct{}, 1)}
	go s.read()
	return s
}

// read runs until the socket fails or is closed; its last frame carries the error.
func (s *socket) read() {
	for {
		if !s.waitRoom() {
			return
		}
		typ, data, err := s.c.Read(context.Background())
		s.mu.Lock()
		s.held += int64(len(data))
		s.mu.Unlock()
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

// waitRoom waits until the frames held are under the limit; false when the socket closed.
func (s *socket) waitRoom() bool {
	for {
		s.mu.Lock()
		ok := s.held < s.limit
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-s.room:
		case <-s.done:
			return false
		}
	}
}

// next returns the next frame, ctx's cause when it ends first, or errSilent after timeout.
func (s *socket) next(ctx context.Context, timeout time.Duration) frame {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case f := <-s.frames:
		s.mu.Lock()
		s.held -= int64(len(f.data))
		s.mu.Unlock()
		select {
		case s.room <- struct{}{}:
		default:
		}
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
