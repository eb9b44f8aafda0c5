package wstransport

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/session"
)

// Accept accepts a WebSocket upgrade as websocket.Accept does (same options, checks and
// errors), over a network connection that can hold a batch of frames for one write: the
// Transport made from the result (Accepted.Transport) implements session.BatchWriter, so a
// burst of events costs one write system call instead of one per event.
func Accept(w http.ResponseWriter, r *http.Request, opts *websocket.AcceptOptions) (*Accepted, error) {
	h := &corkHijacker{ResponseWriter: w}
	c, err := websocket.Accept(h, r, opts)
	if err != nil {
		return nil, err
	}
	return &Accepted{Conn: c, cork: h.cork}, nil
}

// Accepted is a WebSocket connection accepted by Accept.
type Accepted struct {
	Conn *websocket.Conn
	cork *corkConn
}

// Transport is NewLimited over a.Conn, with WriteBatch writing each batch in one network
// write.
func (a *Accepted) Transport(maxFrame int64, b *session.Budget, msgTimeout time.Duration, key string) session.Transport {
	t := newTransport(a.Conn, maxFrame, b, msgTimeout, key)
	t.cork = a.cork
	return t
}

// corkHijacker hands websocket.Accept a corkConn in place of the hijacked connection.
type corkHijacker struct {
	http.ResponseWriter
	cork *corkConn
}

// Hijack implements http.Hijacker over the wrapped ResponseWriter's hijacker (found through
// Unwrap, as websocket.Accept would).
func (h *corkHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.cork = &corkConn{Conn: conn}
	brw.Writer.Reset(h.cork) // empty right after the hijack: the 101 was flushed by it
	return h.cork, brw, nil
}

// Unwrap returns the wrapped ResponseWriter.
func (h *corkHijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// corkConn is a net.Conn whose writes, between hold and release, are kept and then written
// in one Write. The library's frame writes are serialised by its own lock; mu also orders
// them against release, so a control frame written meanwhile (a pong) joins the batch.
type corkConn struct {
	net.Conn
	mu   sync.Mutex
	held bool
	buf  []byte
}

// corkKeep is the largest batch buffer kept between batches.
const corkKeep = 64 << 10

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *corkConn) hold() {
	c.mu.Lock()
	c.held = true
	c.mu.Unlock()
}

// release writes what was kept since hold, in one Write.
func (c *corkConn) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = false
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	if cap(c.buf) > corkKeep {
		c.buf = nil
	} else {
		c.buf = c.buf[:0]
	}
	return err
}

// WriteBatch implements session.BatchWriter: the frames as text messages, in order, in one
// network write when the transport came from Accept (else one per frame).
func (t *wsTransport) WriteBatch(ctx context.Context, frames [][]byte) error {
	if t.cork == nil || len(frames) == 1 {
		for _, f := range frames {
			if err := t.c.Write(ctx, websocket.MessageText, f); err != nil {
				return err
			}
		}
		return nil
	}
	t.cork.hold()
	var err error
	for _, f := range frames {
		if err = t.c.Write(ctx, websocket.MessageText, f); err != nil {
			break
		}
	}
	return errors.Join(err, t.cork.release())
}
