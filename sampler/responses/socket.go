package responses

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// socket is one upstream WebSocket with its reader goroutine. The reader reads all the time,
// also while the connection's rollouts are suspended, so that the upstream's pings are
// answered (coder/websocket handles control frames only inside Read) and an idle socket is
// not dropped as a dead peer. Frames wait in frames until a step takes them; once they hold
// limit bytes, the reader reads no further until a step takes one (so an upstream that streams
// faster than a step decodes costs at most about twice the frame limit). Each frame holds
// sampler.StreamFactor bytes of the server's memory budget per byte, reserved as it arrives,
// until the step that took it has applied it (frame.cost, release) or the socket closed.
// The reader notes when the upstream last delivered data (heard), so that a step's silence
// timeout counts from the last bytes received, not from the start of a frame.
//
// A reservation may wait (the session's budget first parks suspended rollouts to make room,
// for a fraction of a second), and the reader's then holds up the reading of this socket. That
// stalls the step of one rollout only: the socket is one lane's, whose rollouts sample one at a
// time, so every frame it reads belongs to the step waiting for it; other lanes read sockets
// of their own (TestBudgetWaitStallsOneLane). The step's text is reserved by the rollout's own
// goroutine as it applies the events (sampler.Output).
type socket struct {
	c      *websocket.Conn
	frames chan frame
	done   chan struct{} // closed by close: the reader stops
	once   sync.Once
	limit  int64
	room   chan struct{}  // signalled (capacity 1) when a step took a frame
	budget sampler.Budget // nil: frames count nowhere

	mu   sync.Mutex
	held int64 // guarded by mu: bytes of the frames in frames

	born  time.Time
	heard atomic.Int64 // when data last arrived, in nanoseconds since born (0: never)
}

// frame is one message from the reader, or the error that ended it.
type frame struct {
	typ  websocket.MessageType
	data []byte
	err  error
	cost int64 // held in the socket's budget until release
}

// errSilent is the error of a read that waited longer than the silence timeout.
var errSilent = errors.New("upstream silent")

// newSocket starts the reader of c, which holds up to limit bytes of frames no step took yet,
// counting them in b (nil: nowhere).
func newSocket(c *websocket.Conn, limit int64, b sampler.Budget) *socket {
	s := &socket{c: c, frames: make(chan frame, 16), done: make(chan struct{}), limit: limit, room: make(chan struct{}, 1), budget: b,
		born: time.Now()}
	go s.read()
	return s
}

// read runs until the socket fails or is closed; its last frame carries the error. Frames
// still queued once the socket is closed give their budget back.
func (s *socket) read() {
	defer func() {
		select {
		case <-s.done:
			s.drain()
		default: // a step takes the frames left, the error last; close drains the rest
		}
	}()
	for {
		if !s.waitRoom() {
			return
		}
		f := s.readFrame()
		s.mu.Lock()
		s.held += int64(len(f.data))
		s.mu.Unlock()
		select {
		case s.frames <- f:
		case <-s.done:
			s.release(f.cost)
			return
		}
		if f.err != nil {
			return
		}
	}
}

// readFrame reads one message, reserving sampler.StreamFactor bytes of the budget per byte
// as they arrive: a message that does not fit fails the socket with a *sampler.MemoryError
// (its bytes are given back). The message's start and every piece of it that arrives count
// as the upstream being heard.
func (s *socket) readFrame() frame {
	typ, r, err := s.c.Reader(context.Background())
	if err != nil {
		return frame{err: err}
	}
	s.hear()
	m := &sampler.MeteredReader{R: heardReader{r, s}, Budget: s.budget, What: "one WebSocket frame"}
	data, err := protocol.ReadAll(m)
	if err != nil {
		m.Settle()
		return frame{err: err}
	}
	return frame{typ: typ, data: data, cost: m.Held}
}

// heardPiece is the most a read of a message's payload asks for at once: the library fills
// the whole buffer of a read before it returns, so a message that trickles in is noticed as
// heard every heardPiece bytes.
const heardPiece = 4 << 10

// heardReader reads a message's payload in pieces of at most heardPiece bytes and notes each
// piece that arrives as the upstream being heard.
type heardReader struct {
	r io.Reader
	s *socket
}

func (h heardReader) Read(p []byte) (int, error) {
	if len(p) > heardPiece {
		p = p[:heardPiece]
	}
	n, err := h.r.Read(p)
	if n > 0 {
		h.s.hear()
	}
	return n, err
}

// hear notes that data arrived now.
func (s *socket) hear() { s.heard.Store(int64(time.Since(s.born))) }

// idle returns how long the upstream has been silent, counting from since (a time in
// nanoseconds since born) when it was heard last before that.
func (s *socket) idle(since time.Duration) time.Duration {
	return time.Since(s.born) - max(since, time.Duration(s.heard.Load()))
}

// release gives back cost, what a frame holds of the budget: once its event has been
// applied, or when it is dropped.
func (s *socket) release(cost int64) {
	if cost > 0 {
		s.budget.Release(cost)
	}
}

// drain releases the frames no step took.
func (s *socket) drain() {
	for {
		select {
		case f := <-s.frames:
			s.release(f.cost)
		default:
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

// next returns the next frame, ctx's cause when it ends first, or errSilent once the upstream
// sent nothing for timeout: counted from the call, or from the last data received after it (a
// large frame that arrives slowly is waited for as long as its bytes keep coming; the read
// limit and the memory budget bound its size).
func (s *socket) next(ctx context.Context, timeout time.Duration) frame {
	start := time.Since(s.born)
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
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
			if idle := s.idle(start); idle < timeout {
				t.Reset(timeout - idle)
				continue
			}
			return frame{err: errSilent}
		case <-s.done:
			return frame{err: errClosed}
		}
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
		s.drain()
	})
}
