package wstransport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// wsTransport is the Transport over a coder/websocket connection. The library's own read
// limit is disabled: it would close with 1009 before the error frame could
// be sent, so frames are read through an io.LimitReader of maxFrame+1 bytes instead.
type wsTransport struct {
	c        *websocket.Conn
	maxFrame int64
	budget   *session.Budget
	key      string        // whose share of the budget frames count against ("" none)
	msgTime  time.Duration // bound on reading one message from its first frame; 0: none
	cork     *corkConn     // the network connection of a transport from Accept (WriteBatch); nil otherwise
	// Owned by the reading goroutine
	buf      []byte
	reserved int64       // bytes of budget held for the frame last returned
	timer    *time.Timer // the message's read bound, while one is read
}

// keepBuffer is the largest read buffer kept between frames; a larger one (after one large
// frame) is dropped when the next Read begins, so an idle connection holds no large buffer.
const keepBuffer = 64 << 10

// New wraps an accepted WebSocket connection. maxFrame is the largest client
// frame in bytes (-max-frame); 0 means 32 MiB.
func New(c *websocket.Conn, maxFrame int64) session.Transport {
	return NewBudget(c, maxFrame, nil)
}

// NewBudget is New with every frame read counted in b
// (session.DecodeFactor bytes per frame byte, reserved as the frame arrives and held until the next
// Read, i.e. while the frame is decoded and dispatched). A frame that does not fit is
// discarded and Read returns session.ErrOverloaded.
func NewBudget(c *websocket.Conn, maxFrame int64, b *session.Budget) session.Transport {
	return NewLimited(c, maxFrame, b, 0, "")
}

// NewLimited is NewBudget with a bound on the time one message takes to arrive, from its first
// frame's header to its last byte: a client that starts a message (or a fragmented one) and
// trickles or stalls the rest is dropped after msgTimeout (Read returns ErrMessageTimeout; the
// connection is closed and the message's budget released). An idle connection, between
// messages, is not bounded by it. 0 means no bound. Frames count against key's share of b
// (session.QuotaKey; Budget.SetKeyShare); "" means no share.
func NewLimited(c *websocket.Conn, maxFrame int64, b *session.Budget, msgTimeout time.Duration, key string) session.Transport {
	return newTransport(c, maxFrame, b, msgTimeout, key)
}

func newTransport(c *websocket.Conn, maxFrame int64, b *session.Budget, msgTimeout time.Duration, key string) *wsTransport {
	if maxFrame <= 0 {
		maxFrame = session.DefaultMaxFrame
	}
	c.SetReadLimit(-1)
	return &wsTransport{c: c, maxFrame: maxFrame, budget: b, key: key, msgTime: max(msgTimeout, 0)}
}

// ErrMessageTimeout is returned by Read when a message did not arrive whole within the bound of
// NewLimited.
var ErrMessageTimeout = errors.New("wstransport: the client did not finish sending a message in time")

// Read returns the next frame. A frame that is not returned (any error: the connection gone
// in the middle of it, too large, binary, over the budget) holds none of the budget.
func (t *wsTransport) Read(ctx context.Context) ([]byte, error) {
	t.releaseFrame()
	b, err := t.read(ctx)
	if err != nil {
		t.releaseFrame()
	}
	return b, err
}

func (t *wsTransport) read(ctx context.Context) ([]byte, error) {
	if t.msgTime > 0 {
		// The library reads the whole message under the context given to Reader: a context
		// that is cancelled msgTime after the first header arrived bounds the message.
		mctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		ctx = mctx
		defer func() {
			if t.timer != nil {
				t.timer.Stop()
				t.timer = nil
			}
		}()
		b, err := t.readMessage(ctx, func() {
			t.timer = time.AfterFunc(t.msgTime, func() { cancel(ErrMessageTimeout) })
		})
		if err != nil && errors.Is(context.Cause(ctx), ErrMessageTimeout) {
			return nil, fmt.Errorf("%w (%v)", ErrMessageTimeout, t.msgTime)
		}
		return b, err
	}
	return t.readMessage(ctx, func() {})
}

// readMessage reads one message; started is called when its first frame's header has arrived.
func (t *wsTransport) readMessage(ctx context.Context, started func()) ([]byte, error) {
	typ, r, err := t.c.Reader(ctx)
	if err != nil {
		return nil, err
	}
	started()
	t.buf, err = t.readFrame(t.buf[:0], io.LimitReader(r, t.maxFrame+1))
	if err == nil && int64(len(t.buf)) <= t.maxFrame && !t.reserveBytes(session.DecodeCost(t.buf)) {
		err = session.ErrOverloaded // the frame is read: the budget would not cover decoding it
	}
	if errors.Is(err, session.ErrOverloaded) {
		t.releaseFrame()
		if _, err := io.Copy(io.Discard, r); err != nil {
			return nil, err
		}
		return nil, session.ErrOverloaded
	}
	if err != nil {
		return nil, err
	}
	if int64(len(t.buf)) > t.maxFrame {
		return nil, fmt.Errorf("%w: more than %d bytes", session.ErrFrameTooLarge, t.maxFrame)
	}
	if typ != websocket.MessageText {
		return nil, session.ErrBinaryFrame
	}
	return t.buf, nil
}

// releaseFrame returns the budget of the previous frame and drops a large buffer: the caller
// is done with the previous frame once it reads again.
func (t *wsTransport) releaseFrame() {
	t.budget.ReleaseFor(t.key, t.reserved)
	t.reserved = 0
	if cap(t.buf) > keepBuffer {
		t.buf = nil
	}
}

// readFrame reads r to EOF into b, reserving budget before the buffer grows.
func (t *wsTransport) readFrame(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			if len(b) >= protocol.HeavyBytes {
				return t.readLarge(b, r)
			}
			if !t.reserve(int64(len(b)) + 1) {
				return b, session.ErrOverloaded
			}
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

// readLarge reads the rest of a frame of which head has been read, in pieces joined once at
// the end (protocol.ReadAll), reserving budget before each piece: growing one buffer of tens
// of MiB copies it whole in steps the scheduler cannot preempt.
func (t *wsTransport) readLarge(head []byte, r io.Reader) ([]byte, error) {
	rest := &reservingReader{t: t, r: r, n: int64(len(head))}
	return protocol.ReadAll(io.MultiReader(bytes.NewReader(head), rest))
}

// reservingReader reads a frame's bytes after the first n, making sure the frame's
// reservation covers each read before it is made (session.ErrOverloaded when it cannot).
type reservingReader struct {
	t *wsTransport
	r io.Reader
	n int64
}

func (m *reservingReader) Read(p []byte) (int, error) {
	if !m.t.reserve(m.n + int64(len(p))) {
		return 0, session.ErrOverloaded
	}
	k, err := m.r.Read(p)
	m.n += int64(k)
	return k, err
}

// reserve makes sure the frame's reservation covers a buffer of n bytes (with a quarter of
// headroom, so that a growing buffer reserves O(log n) times).
func (t *wsTransport) reserve(n int64) bool {
	if t.budget == nil || n*session.DecodeFactor <= t.reserved {
		return true
	}
	return t.reserveBytes(max((n+n/4)*session.DecodeFactor, 4096*session.DecodeFactor))
}

// reserveBytes makes the frame's reservation at least n bytes.
func (t *wsTransport) reserveBytes(n int64) bool {
	if t.budget == nil || n <= t.reserved {
		return true
	}
	if !t.budget.TryReserveFor(t.key, t.reserved, n-t.reserved) {
		return false
	}
	t.reserved = n
	return true
}

func (t *wsTransport) Write(ctx context.Context, data []byte) error {
	return t.c.Write(ctx, websocket.MessageText, data)
}

func (t *wsTransport) Close(code protocol.CloseCode, reason string) error {
	return t.c.Close(websocket.StatusCode(code), reason)
}

// Ping sends a protocol ping and waits for the pong (the connection's read loop receives it).
func (t *wsTransport) Ping(ctx context.Context) error { return t.c.Ping(ctx) }

func (t *wsTransport) Abort() error { return t.c.CloseNow() }
