package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/session"
)

// realServer runs s through HTTPServer on a loopback listener (the command's configuration)
// and returns its address "127.0.0.1:PORT".
func realServer(t *testing.T, opts Options) (*Server, string) {
	t.Helper()
	return realServerOn(t, opts, nil)
}

// smallSendBuffers makes the server's socket send buffers small, so that a client that does
// not read blocks the server's writes after a few KiB.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// realServerOn is realServer with the listener wrapped by wrap (nil: none).
func realServerOn(t *testing.T, opts Options, wrap func(net.Listener) net.Listener) (*Server, string) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	s := New(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	hs, l := s.HTTPServer(ln)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(l)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		_ = hs.Shutdown(ctx)
		_ = hs.Close()
		<-done
	})
	return s, ln.Addr().String()
}

// rawConn is one client TCP connection that writes requests by hand.
type rawConn struct {
	t *testing.T
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, Conn: c, r: bufio.NewReader(c)}
}

func (c *rawConn) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.Conn, s); err != nil {
		c.t.Fatal(err)
	}
}

// head sends the headers of a POST /v1/responses with Content-Length n and no body yet.
func (c *rawConn) head(n int) {
	c.send(fmt.Sprintf("POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", n))
}

func (c *rawConn) get(path string) {
	c.send("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")
}

// response reads one response and returns its status and body.
func (c *rawConn) response() (int, string) {
	code, _, body := c.responseHeader()
	return code, body
}

// responseHeader reads one response and returns its status, header and body.
func (c *rawConn) responseHeader() (int, http.Header, string) {
	c.t.Helper()
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		c.t.Fatalf("reading the response: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// closed reports whether the server closed the connection (EOF or reset on read).
func (c *rawConn) closed() bool {
	_, err := c.r.ReadByte()
	return err != nil
}

func TestContentLengthOverLimitRefusedBeforeReading(t *testing.T) {
	_, addr := realServer(t, Options{Limits: session.Limits{MaxFrame: 1 << 20}})
	c := dialRaw(t, addr)
	c.head(2 << 20) // and no body at all: the answer must not wait for it
	if code, body := c.response(); code != 413 || !strings.Contains(body, "request_body_too_large") {
		t.Fatalf("Content-Length over -max-frame: %d %s", code, body)
	}
}

func TestStalledBodyDropped(t *testing.T) {
	_, addr := realServer(t, Options{Limits: session.Limits{MaxFrame: 1 << 20}, ReadTimeout: 200 * time.Millisecond})
	c := dialRaw(t, addr)
	c.head(64 << 10)
	c.send(`{"model":"sim","input":"`) // then nothing
	if code, body := c.response(); code != 408 || !strings.Contains(body, "request_timeout") {
		t.Fatalf("stalled body: %d %s", code, body)
	}
	if !c.closed() {
		t.Fatal("the connection of a stalled body stays open")
	}
}

func TestIdleKeepAliveClosed(t *testing.T) {
	_, addr := realServer(t, Options{IdleTimeout: 200 * time.Millisecond})
	c := dialRaw(t, addr)
	c.get("/healthz")
	if code, _ := c.response(); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
	if !c.closed() { // blocks until the server closes the idle connection
		t.Fatal("idle keep-alive connection not closed")
	}
}

// countAccepts counts the connections its listener has accepted from the kernel.
type countAccepts struct {
	net.Listener
	n *atomic.Int64
}

func (l countAccepts) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// stalledPost opens a connection whose POST is being served: its headers are read and its
// handler reads a body that stalls.
func stalledPost(t *testing.T, addr string) *rawConn {
	t.Helper()
	c := dialRaw(t, addr)
	c.head(1000)
	c.send(`{"model":"sim",`)
	return c
}

func TestHTTPConnectionBoundKeepsHealthz(t *testing.T) {
	var accepted atomic.Int64
	s, addr := realServerOn(t, Options{MaxHTTPConnections: 3}, func(ln net.Listener) net.Listener { return countAccepts{ln, &accepted} })
	// Three requests being served hold the bound.
	for range 3 {
		stalledPost(t, addr)
	}
	waitFor(t, func() bool { return s.Budget().InUse() == 3*session.DecodeFactor*1000 })
	// The reserve: /healthz answers, anything else is 503, and the connection is closed.
	h := dialRaw(t, addr)
	h.get("/healthz")
	if code, _ := h.response(); code != 200 {
		t.Fatalf("/healthz at the bound: %d", code)
	}
	if !h.closed() {
		t.Fatal("a reserve connection stays open after /healthz")
	}
	p := dialRaw(t, addr)
	p.get("/v1/responses/resp_x")
	if code, h, body := p.responseHeader(); code != 503 || !strings.Contains(body, "too_many_connections") || h.Get("Retry-After") != "1" {
		t.Fatalf("request over the bound: %d Retry-After %q %s", code, h.Get("Retry-After"), body)
	}
	if !p.closed() {
		t.Fatal("a reserve connection stays open after its 503")
	}
	// Reserve connections that never finish their headers hold nothing: the next /healthz
	// closes the one that has waited the longest and is answered.
	var held []*rawConn
	for range HealthzReserve {
		c := dialRaw(t, addr)
		c.send("GET /hea")
		held = append(held, c)
	}
	waitFor(t, func() bool { return accepted.Load() == 3+2+HealthzReserve })
	h = dialRaw(t, addr)
	h.get("/healthz")
	if code, _ := h.response(); code != 200 {
		t.Fatalf("/healthz with the reserve full of unfinished headers: %d", code)
	}
	if !held[0].closed() {
		t.Fatal("the oldest connection still sending headers was not closed")
	}
}

// TestHTTPConnectionBoundSlowloris: connections that trickle headers and never finish them
// count as idle: at the bound a new client closes the oldest of them and is served in full,
// and /healthz answers, however many there are.
func TestHTTPConnectionBoundSlowloris(t *testing.T) {
	var accepted atomic.Int64
	_, addr := realServerOn(t, Options{MaxHTTPConnections: 4}, func(ln net.Listener) net.Listener { return countAccepts{ln, &accepted} })
	var slow []*rawConn
	for range 4 + HealthzReserve + 10 {
		c := dialRaw(t, addr)
		c.send("POST /v1/responses HTTP/1.1\r\nHost: x\r\nX-Slow: a")
		slow = append(slow, c)
	}
	waitFor(t, func() bool { return accepted.Load() == int64(len(slow)) })
	for _, r := range []struct {
		path string
		want int
	}{{"/healthz", 200}, {"/v1/responses/resp_missing", 404}, {"/healthz", 200}} {
		c := dialRaw(t, addr)
		c.get(r.path)
		if code, body := c.response(); code != r.want {
			t.Fatalf("%s with the bound full of unfinished headers: %d %s", r.path, code, body)
		}
	}
	// The oldest made room first.
	for _, c := range slow[:HealthzReserve] {
		if !c.closed() {
			t.Fatal("an old connection still sending headers was not closed")
		}
	}
}

func TestHTTPConnectionBoundEvictsIdle(t *testing.T) {
	_, addr := realServer(t, Options{MaxHTTPConnections: 3})
	var idle []*rawConn
	for range 3 {
		c := dialRaw(t, addr)
		c.get("/healthz")
		if code, _ := c.response(); code != 200 {
			t.Fatalf("/healthz: %d", code)
		}
		idle = append(idle, c)
	}
	// A fourth client is served in full: the longest-idle keep-alive makes room.
	c := dialRaw(t, addr)
	c.get("/v1/responses/resp_missing")
	if code, body := c.response(); code != 404 {
		t.Fatalf("request at the bound with idle connections: %d %s", code, body)
	}
	if !idle[0].closed() {
		t.Fatal("the longest-idle connection was not closed")
	}
}

func TestMemoryBudgetRefusesAtOnce(t *testing.T) {
	s, addr := realServer(t, Options{Limits: session.Limits{MaxFrame: 1 << 20}, MaxMemory: 4 << 20})
	// A body of 900 KiB in progress holds 4×900 KiB of the 4 MiB budget.
	stalled := dialRaw(t, addr)
	stalled.head(900 << 10)
	stalled.send(`{"model":"sim","input":"`)
	waitFor(t, func() bool { return s.Budget().InUse() > 0 })
	p := dialRaw(t, addr)
	p.head(300 << 10)
	p.send("{") // admitted from its Content-Length once the body begins
	if code, body := p.response(); code != 503 || !strings.Contains(body, "server_overloaded") {
		t.Fatalf("POST over the memory budget: %d %s", code, body)
	}
	// A WebSocket frame over the budget gets an error frame; the connection stays usable.
	c := dialAppend(t, "ws://"+addr+"/v1/responses")
	c.SendRaw(`{"type":"response.processed","event_id":"` + strings.Repeat("x", 300<<10) + `"}`)
	c.ExpectError(503, "server_overloaded", "")
	_ = stalled.Close()
	waitFor(t, func() bool { return s.Budget().InUse() < 100<<10 })
	c.Send(create("hello", nil))
	if f := c.Until("response.completed"); len(f) == 0 {
		t.Fatal("no answer after the budget was released")
	}
}

func TestDecodingBound(t *testing.T) {
	s, addr := realServer(t, Options{MaxDecoding: 1})
	stalled := dialRaw(t, addr)
	stalled.head(1000)
	stalled.send(`{"model":"sim",`)
	waitFor(t, func() bool { return s.Budget().InUse() > 0 })
	p := dialRaw(t, addr)
	body := `{"model":"sim","input":"hi"}`
	p.head(len(body))
	p.send(body)
	if code, b := p.response(); code != 503 || !strings.Contains(b, "server_overloaded") {
		t.Fatalf("POST over the decoding bound: %d %s", code, b)
	}
}

// After one large frame, an idle WebSocket holds no reservation (and no large buffer: both
// are dropped when the next read begins).
func TestLargeFrameReleasedWhileIdle(t *testing.T) {
	s, addr := realServer(t, Options{Limits: session.Limits{MaxFrame: 1 << 20}})
	c := dialAppend(t, "ws://"+addr+"/v1/responses")
	c.SendRaw(`{"type":"response.processed","event_id":"` + strings.Repeat("x", 900<<10) + `"}`)
	c.ExpectError(400, "missing_required_parameter", "response_id")
	c.SendRaw(`{"type":"nope"}`)
	c.ExpectError(400, "unknown_event_type", "type")
	// What stays is small: the last (small) frame's read reservation and, until the writer's
	// watchdog sees its queue empty, one 64 KiB write unit — never the large frame's 3.6 MB.
	waitFor(t, func() bool { return s.Budget().InUse() <= 128<<10 })
}

// waitFor polls cond until it holds (an ordering wait, not a speed assertion).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
	}
}

// Many tiny items decode to far more than their JSON size: the budget counts them before
// decoding (the concurrent 32 MiB POSTs of ~1.1 M items, scaled down).
func TestTinyItemsCountedBeforeDecoding(t *testing.T) {
	_, addr := realServer(t, Options{Limits: session.Limits{MaxFrame: 1 << 20}, MaxMemory: 8 << 20})
	var b strings.Builder
	b.WriteString(`{"model":"sim","input":[`)
	for i := 0; b.Len() < 1<<20-64; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":"user","content":"x"}`)
	}
	b.WriteString(`]}`)
	p := dialRaw(t, addr)
	p.head(b.Len())
	p.send(b.String())
	if code, body := p.response(); code != 503 || !strings.Contains(body, "server_overloaded") {
		t.Fatalf("1 MiB of tiny items within an 8 MiB budget: %d %s", code, body)
	}
	c := dialAppend(t, "ws://"+addr+"/v1/responses")
	c.SendRaw(`{"type":"response.create",` + strings.TrimPrefix(b.String(), "{"))
	c.ExpectError(503, "server_overloaded", "")
	c.Send(create("hello", nil))
	c.Until("response.completed")
}

// A client that does not read a JSON answer is cut off after the write timeout: the answer
// it finally reads is truncated.
func TestJSONAnswerHasWriteDeadline(t *testing.T) {
	_, addr := realServerOn(t, Options{Limits: session.Limits{MaxFrame: 8 << 20, WriteTimeout: 2 * time.Second}},
		func(l net.Listener) net.Listener { return smallSendBuffers{l} })
	code, r := post(t, "ws://"+addr+"/v1/responses", "", map[string]any{"model": "sim", "input": "hi", "tools": []any{bigTool(2 << 20)}})
	if code != 200 {
		t.Fatalf("POST: %d", code)
	}
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := io.WriteString(nc, "GET /v1/responses/"+r["id"].(string)+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // not reading, past the write timeout
	_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		return // cut off before the headers arrived
	}
	defer resp.Body.Close()
	if n, err := io.Copy(io.Discard, resp.Body); err == nil {
		t.Fatalf("a client that did not read got the whole answer (%d bytes) after the write timeout", n)
	}
}

// A WebSocket that goes away in the middle of a message releases what the message had
// reserved of the budget.
func TestPartialFrameReleasedOnDisconnect(t *testing.T) {
	s, addr := realServer(t, Options{Limits: session.Limits{MaxFrame: 1 << 20}})
	c, _, err := websocket.Dial(t.Context(), "ws://"+addr+"/v1/responses", nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Writer(t.Context(), websocket.MessageText)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(`{"type":"response.create","input":"` + strings.Repeat("x", 256<<10))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.Budget().InUse() >= 256<<10 })
	_ = c.CloseNow() // the message never ends
	waitFor(t, func() bool { return s.Budget().InUse() == 0 })
}

// TestStalledMessageDropped: a client that starts a WebSocket message and never finishes it is
// dropped after ReadTimeout from the first frame — the connection closes and the partial
// message's budget is released — while an idle connection beside it stays open and usable.
func TestStalledMessageDropped(t *testing.T) {
	s, addr := realServer(t, Options{Limits: session.Limits{MaxFrame: 1 << 20}, ReadTimeout: 300 * time.Millisecond})
	idle, _, err := websocket.Dial(t.Context(), "ws://"+addr+"/v1/responses", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.CloseNow()
	c, _, err := websocket.Dial(t.Context(), "ws://"+addr+"/v1/responses", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	w, err := c.Writer(t.Context(), websocket.MessageText)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(`{"type":"response.create","input":"` + strings.Repeat("x", 256<<10))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.Budget().InUse() >= 256<<10 })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, _, err := c.Read(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("the stalled message's connection: read %v (context %v), want it closed by the server", err, ctx.Err())
	}
	waitFor(t, func() bool { return s.Budget().InUse() == WebSocketCost }) // the idle connection's own
	if err := idle.Write(t.Context(), websocket.MessageText, []byte(`{"type":"response.create","model":"sim","input":"hi"}`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := idle.Read(ctx); err != nil {
		t.Fatalf("the idle connection beside it: %v", err)
	}
}
