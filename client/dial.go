package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/tetherd/tether/internal/wsguard"
)

// AppendBeta is the OpenAI-Beta token that opts a connection into the append shape; the server
// echoes it on the 101 to confirm (append-protocol.md, Opting in).
const AppendBeta = "responses_append=v1"

// ReattachBeta is the OpenAI-Beta token that opts an append-shape connection into
// reattachment: a server that shuts down parks its suspended rollouts to a shared store and
// says so with response.parked; the client's next Append resumes them on a new connection
// (append-protocol.md, Reattaching after a shutdown). Dial sends it unless
// Options.NoReconnect or Options.PublicShape.
const ReattachBeta = "responses_reattach=v1"

// Shape is the protocol a connection speaks.
type Shape string

// The two shapes (docs/append-protocol.md, Differences from the public shape).
const (
	ShapeAppend Shape = "append" // the server confirmed responses_append=v1
	ShapePublic Shape = "public" // the OpenAI Responses API over WebSocket
)

// DefaultDialTimeout is the dial timeout when Options.DialTimeout is 0.
const DefaultDialTimeout = 30 * time.Second

// Options configure Dial. The zero value opts into the append shape without an API key.
type Options struct {
	// APIKey is sent as Authorization: Bearer APIKey; "" sends none.
	APIKey string
	// Header holds extra upgrade headers. OpenAI-Beta values are kept; the append token is added.
	Header http.Header
	// DialTimeout bounds each WebSocket handshake (also the redials of reconnects). 0 means
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// HTTPClient performs the handshake; nil means http.DefaultClient.
	HTTPClient *http.Client
	// PublicShape does not opt in: the connection speaks the public shape.
	PublicShape bool
	// QueryOptIn also opts in with the query parameter protocol=append.v1, which passes proxies
	// that drop the OpenAI-Beta header (append-protocol.md, Opting in).
	QueryOptIn bool
	// NoReconnect keeps the client from dialing again after the server ended the connection for
	// its age limit or with close 1001 or 1012, and from opting into reattachment
	// (ReattachBeta): suspended rollouts then end as the server ended them (response.incomplete
	// with reason connection_limit or server_shutdown), or with ErrConnectionLost when it sent
	// no terminal event, and the next Start returns ErrConnectionLost.
	NoReconnect bool
	// ReadLimit is the largest server message in bytes; 0 or less means no limit. A larger
	// message ends the connection (close 1009), and its rollouts with ErrConnectionLost.
	ReadLimit int64
	// Trace, if set, sees every frame: sent (true) on the sending goroutine before the write,
	// received (false) on the connection's reader goroutine. It must not block, nor keep frame.
	Trace func(sent bool, frame []byte)
}

// Conn is a client connection to one server URL. It holds one WebSocket at a time and dials a
// new one after the server ends the current one for its age limit or with close 1001 or 1012
// (package doc, Reconnects). Its methods may be called from several goroutines.
type Conn struct {
	// Immutable
	url  string
	opts Options

	closed atomic.Bool // set by Close: every call after it returns ErrClosed
	// life ends at Close (end): a dial under way gives up.
	life context.Context
	end  context.CancelFunc

	mu   sync.Mutex // guards link and old; held while dialing
	link *link
	old  []*link // links replaced after they went away; their readers may still run
}

// Dial connects to a Tether (or any Responses API WebSocket) server. url is a WebSocket URL
// (ws://host:port/v1/responses) or an API base URL as the SDKs take it (http://host:port/v1):
// http and https become ws and wss, and a path that does not end in /responses gets it added
// (an empty path becomes /v1/responses). opts may be nil. A refused upgrade returns a *Error
// with the HTTP status.
func Dial(ctx context.Context, url string, opts *Options) (*Conn, error) {
	u, err := wsURL(url)
	if err != nil {
		return nil, err
	}
	c := &Conn{url: u}
	c.life, c.end = context.WithCancel(context.Background())
	if opts != nil {
		c.opts = *opts
	}
	l, err := c.dial(ctx)
	if err != nil {
		c.end()
		return nil, err
	}
	c.link = l
	return c, nil
}

// wsURL normalizes a base URL or WebSocket URL to the WebSocket URL of /responses.
func wsURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("client: bad URL %q: %w", s, err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	case "ws", "wss":
	default:
		return "", fmt.Errorf("client: bad URL %q: scheme must be ws, wss, http or https", s)
	}
	p := strings.TrimSuffix(u.Path, "/")
	switch {
	case p == "":
		p = "/v1/responses"
	case !strings.HasSuffix(p, "/responses"):
		p += "/responses"
	}
	u.Path = p
	return u.String(), nil
}

// URL is the WebSocket URL the Conn dials.
func (c *Conn) URL() string { return c.url }

// Shape is the shape of the current WebSocket (of the last one, after it ended).
func (c *Conn) Shape() Shape {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.link == nil {
		return ShapeAppend
	}
	return c.link.shape
}

// DefaultCloseTimeout bounds how long Close waits for the server to answer the close
// handshake.
const DefaultCloseTimeout = time.Second

// Close is CloseContext with a context that ends after DefaultCloseTimeout (1 s): it returns
// within about that time even when the server does not answer the close handshake.
func (c *Conn) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultCloseTimeout)
	defer cancel()
	return c.CloseContext(ctx)
}

// CloseContext closes the Conn: it sends the WebSocket close frame (status 1000) and waits
// for the server's until ctx ends, then closes the TCP connection; a dial under way (a
// reconnect) gives up at once. It returns when the Conn's reader goroutines have exited: nil
// when the server answered (or the connection had ended), else an error wrapping ctx's. Either
// way the Conn is closed: rollouts that had not ended get ErrClosed from Events, and every
// later call ErrClosed. The close handshake itself is github.com/coder/websocket's, bounded
// there to 5 s for writing the frame and 5 s for the answer; ctx cuts both short. Calling it
// again returns nil once the first call has returned.
func (c *Conn) CloseContext(ctx context.Context) error {
	c.closed.Store(true)
	c.end()
	c.mu.Lock()
	links := append(c.old, c.link)
	c.old = nil
	c.mu.Unlock()
	var err error
	for i, l := range links {
		// The links replaced after they went away have nothing to say goodbye to.
		if e := l.close(ctx, i == len(links)-1); e != nil {
			err = fmt.Errorf("client: close: the server did not answer the close handshake: %w", e)
		}
	}
	return err
}

// current returns the live WebSocket, dialing a new one if the previous one went away.
func (c *Conn) current(ctx context.Context) (*link, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if c.link != nil {
		gone, err := c.link.status()
		if !gone {
			return c.link, nil
		}
		if !c.link.goingAway() || c.opts.NoReconnect {
			return nil, fmt.Errorf("%w: %w", ErrConnectionLost, err)
		}
	}
	l, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.old = append(slices.DeleteFunc(c.old, (*link).exited), c.link)
	c.link = l
	return l, nil
}

// dial opens one WebSocket and starts its reader.
func (c *Conn) dial(ctx context.Context) (*link, error) {
	timeout := c.opts.DialTimeout
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer context.AfterFunc(c.life, cancel)()
	h := http.Header{}
	for k, vs := range c.opts.Header {
		h[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	if c.opts.APIKey != "" {
		h.Set("Authorization", "Bearer "+c.opts.APIKey)
	}
	if !c.opts.PublicShape {
		h.Add("OpenAI-Beta", AppendBeta)
		if !c.opts.NoReconnect {
			h.Add("OpenAI-Beta", ReattachBeta)
		}
	}
	u := c.url
	if c.opts.QueryOptIn && !c.opts.PublicShape {
		u = withQuery(u, "protocol", "append.v1")
		if !c.opts.NoReconnect {
			u = withQuery(u, "reattach", "v1")
		}
	}
	// wsguard: a message cut off by the end of the connection is a lost connection, not an
	// empty or truncated frame.
	hc := wsguard.Client(c.opts.HTTPClient) // a copy
	var raw io.Closer
	hc.Transport = catchStream{hc.Transport, &raw}
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: h, HTTPClient: hc})
	if err != nil {
		return nil, dialError(u, resp, err)
	}
	limit := c.opts.ReadLimit
	if limit <= 0 {
		limit = -1
	}
	ws.SetReadLimit(limit)
	shape := ShapePublic
	if !c.opts.PublicShape && hasToken(resp.Header.Values("OpenAI-Beta"), AppendBeta) {
		shape = ShapeAppend
	}
	l := newLink(ws, raw, shape, !c.opts.NoReconnect, c.opts.Trace)
	go l.read()
	return l, nil
}

// catchStream keeps the body of a 101 answer, the connection's byte stream, in *stream; the
// round trip runs on the goroutine of websocket.Dial.
type catchStream struct {
	base   http.RoundTripper
	stream *io.Closer
}

func (t catchStream) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
		*t.stream = resp.Body
	}
	return resp, err
}

// withQuery adds key=value to the query of a URL that wsURL accepted.
func withQuery(s, key, value string) string {
	u, _ := url.Parse(s)
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// dialError turns a refused upgrade into a *Error when the server sent an error body.
func dialError(url string, resp *http.Response, err error) error {
	if resp == nil || resp.StatusCode == http.StatusSwitchingProtocols {
		return fmt.Errorf("client: dial %s: %w", url, err)
	}
	e := &Error{Status: resp.StatusCode, Message: http.StatusText(resp.StatusCode)}
	if resp.Body != nil {
		b, _ := io.ReadAll(resp.Body)
		var env struct {
			Error *struct {
				Type    string  `json:"type"`
				Code    string  `json:"code"`
				Param   *string `json:"param"`
				Message string  `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &env) == nil && env.Error != nil {
			e.Type, e.Code, e.Message = env.Error.Type, env.Error.Code, env.Error.Message
			if env.Error.Param != nil {
				e.Param = *env.Error.Param
			}
		} else if len(b) > 0 {
			e.Message = strings.TrimSpace(string(b))
		}
	}
	return fmt.Errorf("client: dial %s: %w", url, e)
}

// hasToken reports whether a comma-separated header list holds token (case-insensitive).
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(s), token) {
				return true
			}
		}
	}
	return false
}
