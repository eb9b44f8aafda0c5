package soak

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// With Config.Lanes, the workers of one connection slot share one WebSocket, each in its own
// named lane (stream_id lane-0 …): their rollouts run concurrently on that socket. One reader
// routes every frame to its lane by stream_id; a frame of no lane is a violation. Chaos that
// belongs to the whole socket (bad frames, whose errors name no lane, and slow or stalled
// readers) is off; a disconnect drops every lane of the socket, whose rollouts then count as
// aborted.

// laneBuffer is how many frames wait for a lane's worker before the socket's reader blocks.
const laneBuffer = 4096

// sockGroup is one connection slot of lane workers: the socket they share, redialled when it
// is dropped.
type sockGroup struct {
	t     *target
	st    *stats
	shape shape

	mu  sync.Mutex // guards cur
	cur *mux
}

// mux is one shared socket and its reader.
type mux struct {
	ws   *websocket.Conn
	st   *stats
	done chan struct{} // closed when the reader has ended

	mu     sync.Mutex // guards lanes, err and closed
	lanes  map[string]chan []byte
	err    error // why the reader ended
	closed bool  // a lane worker closed the socket (chaos, or after a violation it reported)
	users  int   // lane workers attached
}

// attach returns a connection for lane on the group's socket, dialling one if there is none
// or it was dropped.
func (g *sockGroup) attach(ctx context.Context, lane string) (*conn, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cur == nil || g.cur.ended() {
		g.st.dials.Add(1)
		c, err := g.t.dial(ctx, g.shape)
		if err != nil {
			return nil, err
		}
		c.cancel()
		g.cur = &mux{ws: c.c, st: g.st, done: make(chan struct{}), lanes: map[string]chan []byte{}}
		go g.cur.read()
	}
	m := g.cur
	ch := make(chan []byte, laneBuffer)
	m.mu.Lock()
	if m.err != nil || m.closed {
		m.mu.Unlock()
		return nil, errors.New("soak: the shared socket ended")
	}
	m.lanes[lane] = ch
	m.users++
	m.mu.Unlock()
	cctx, ccancel := context.WithCancel(ctx)
	return &conn{ctx: cctx, cancel: ccancel, c: m.ws, shape: g.shape, opened: time.Now(), mux: m, in: ch}, nil
}

// ended reports whether the socket was closed or its reader ended.
func (m *mux) ended() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed || m.err != nil
}

// read routes the socket's frames to their lanes until the socket ends, then closes every
// lane's channel.
func (m *mux) read() {
	defer close(m.done)
	for {
		typ, data, err := m.ws.Read(context.Background())
		if err == nil && typ != websocket.MessageText {
			err = fmt.Errorf("the server sent a binary frame: %.200q", data)
		}
		m.mu.Lock()
		if err != nil {
			m.err = err
			for _, ch := range m.lanes {
				close(ch)
			}
			m.lanes = nil
			m.mu.Unlock()
			return
		}
		ch := m.lanes[streamID(data)]
		m.mu.Unlock()
		if ch == nil {
			m.st.violation(nil, "a frame for no lane of the socket: %.300s", data)
			continue
		}
		ch <- data
	}
}

// close drops the shared socket: every lane of it ends.
func (m *mux) close(graceful bool) {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	if graceful {
		_ = m.ws.Close(websocket.StatusNormalClosure, "soak")
	} else {
		_ = m.ws.CloseNow()
	}
	<-m.done
}

// leave detaches lane (its worker stops): the last lane to leave closes the socket normally.
func (m *mux) leave(lane string) {
	m.mu.Lock()
	delete(m.lanes, lane)
	m.users--
	last := m.users == 0 && !m.closed
	m.mu.Unlock()
	if last {
		m.close(true)
	}
}

// droppedByLane reports whether a lane worker closed the socket on purpose.
func (m *mux) droppedByLane() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// readLane is conn.read for a lane of a shared socket.
func (c *conn) readLane() (websocket.MessageType, []byte, error) {
	ctx, cancel := context.WithTimeout(c.ctx, frameTimeout)
	defer cancel()
	select {
	case data, ok := <-c.in:
		if !ok {
			c.mux.mu.Lock()
			err := c.mux.err
			c.mux.mu.Unlock()
			if err == nil {
				err = errors.New("soak: the shared socket ended")
			}
			return 0, nil, err
		}
		return websocket.MessageText, data, nil
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	}
}
