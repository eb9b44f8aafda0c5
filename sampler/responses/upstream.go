package responses

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/tetherd/tether/internal/wsguard"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/sampler"
)

// upstream is the WebSocket of one client connection to the upstream, shared by the sessions
// of its rollouts. Steps hold sem while they use the socket, so frames of two steps never mix.
type upstream struct {
	m      *Model
	sem    chan struct{}
	refs   int            // guarded by Model.mu
	budget sampler.Budget // the server's memory budget (nil: none): frames count there

	mu   sync.Mutex
	conn *socket // nil until dialled, and after drop
	gen  int     // counts dials: a previous_response_id lives on one socket only
}

func newUpstream(m *Model, b sampler.Budget) *upstream {
	return &upstream{m: m, sem: make(chan struct{}, 1), budget: b}
}

// acquire waits for the socket's turn (rollouts of a connection sample one at a time, so this
// is normally free at once).
func (u *upstream) acquire(ctx context.Context) error {
	select {
	case u.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (u *upstream) unlock() { <-u.sem }

// socket returns the open socket and its generation, dialling one when there is none; fresh
// reports a socket dialled by this call.
func (u *upstream) socket(ctx context.Context) (c *socket, gen int, fresh bool, err error) {
	u.mu.Lock()
	c, gen = u.conn, u.gen
	u.mu.Unlock()
	if c != nil {
		return c, gen, false, nil
	}
	wc, err := u.dial(ctx)
	if err != nil {
		return nil, 0, false, err
	}
	c = newSocket(wc, u.m.opts.ReadLimit, u.budget)
	u.mu.Lock()
	u.conn = c
	u.gen++
	gen = u.gen
	u.mu.Unlock()
	return c, gen, true, nil
}

// dial opens a socket to the upstream within Options.Timeout.
func (u *upstream) dial(ctx context.Context) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, u.m.opts.Timeout)
	defer cancel()
	var h http.Header
	if u.m.opts.APIKey != "" {
		h = http.Header{"Authorization": {"Bearer " + u.m.opts.APIKey}}
	}
	c, resp, err := websocket.Dial(ctx, u.m.url, &websocket.DialOptions{HTTPHeader: h, HTTPClient: wsguard.Client(nil)})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("upstream %s: WebSocket handshake refused with HTTP %d", u.m.url, resp.StatusCode)
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return nil, fmt.Errorf("upstream %s: no answer within %v", u.m.url, u.m.opts.Timeout)
		}
		return nil, fmt.Errorf("upstream %s: %w", u.m.url, err)
	}
	c.SetReadLimit(u.m.opts.ReadLimit)
	return c, nil
}

// drop closes c if it is still the current socket; the next step dials again.
func (u *upstream) drop(c *socket) {
	u.mu.Lock()
	if u.conn == c {
		u.conn = nil
	}
	u.mu.Unlock()
	c.close()
}

// close closes the socket, if any (the last session of the connection closed).
func (u *upstream) close() {
	u.mu.Lock()
	c := u.conn
	u.conn = nil
	u.mu.Unlock()
	if c != nil {
		c.close()
	}
}
