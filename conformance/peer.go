package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// M is a JSON object a scenario sends or expects.
type M = map[string]any

// appendBeta is the OpenAI-Beta token that opts a WebSocket into the append shape, and that
// the server echoes on the 101 to confirm it.
const appendBeta = "responses_append=v1"

// quiet is how long expectNothing listens.
const quiet = 150 * time.Millisecond

// Peer is the suite's side of one WebSocket connection. Every frame it receives is checked
// against the grammar of its shape (and the schema, with -schema) before a scenario sees it.
type Peer struct {
	// Immutable
	t     *T
	name  string // "c1 (append)"
	shape string // shapePublic or shapeAppend
	ws    *websocket.Conn
	resp  *http.Response
	g     *Grammar
	done  chan struct{} // closed when the reader exits
	wake  chan struct{} // signalled when the reader queued something

	mu    sync.Mutex // guards queue and rerr
	queue [][]byte
	rerr  error

	// Owned by the scenario goroutine
	log     []string            // the last frames exchanged, for failure reports
	lastRaw []byte              // the last frame received, as sent
	lanes   map[string]*Grammar // named lanes (stream_id) seen; each lane is its own stream
	within  *string             // with inLane: the lane next reads frames of
	held    []Frame             // checked frames of other lanes, read while within was set
}

// dial opens a WebSocket in the scenario's shape.
func (t *T) dial() *Peer { return t.dialShape(t.shape, nil, "") }

// dialShape opens a WebSocket in shape; extra headers and a query string are added to the
// upgrade request. An append-shape dial fails the scenario unless the 101 confirms the opt-in.
func (t *T) dialShape(shape string, extra http.Header, query string) *Peer {
	h := http.Header{}
	if t.cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+t.cfg.APIKey)
	}
	if shape == shapeAppend && extra == nil && query == "" {
		h.Set("OpenAI-Beta", appendBeta)
	}
	for k, vs := range extra {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	url := t.r.wsURL
	if query != "" {
		url += "?" + query
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.Timeout)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h, HTTPClient: t.r.client})
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	ws.SetReadLimit(-1)
	t.nconn++
	p := &Peer{
		t:     t,
		name:  fmt.Sprintf("c%d (%s)", t.nconn, shape),
		shape: shape,
		ws:    ws,
		resp:  resp,
		g:     newGrammar(shape, t.ids),
		done:  make(chan struct{}),
		wake:  make(chan struct{}, 1),
	}
	t.peers = append(t.peers, p)
	go p.read()
	confirmed := hasToken(resp.Header.Values("OpenAI-Beta"), appendBeta)
	if shape == shapeAppend && !confirmed {
		t.Fatalf("%s: the 101 does not confirm the append opt-in (OpenAI-Beta: %q)", p.name, resp.Header.Values("OpenAI-Beta"))
	}
	if shape == shapePublic && confirmed {
		t.Fatalf("%s: the 101 of a connection that did not opt in confirms the append shape", p.name)
	}
	return p
}

// hasToken reports whether a comma-separated header list contains token (case-insensitive).
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

// read owns the connection's reads: it queues every message until the connection ends.
func (p *Peer) read() {
	defer close(p.done)
	for {
		typ, data, err := p.ws.Read(context.Background())
		if err == nil && typ != websocket.MessageText {
			err = fmt.Errorf("the server sent a binary frame: %q", clip(string(data), 200))
		}
		p.mu.Lock()
		if err != nil {
			p.rerr = err
		} else {
			p.queue = append(p.queue, data)
		}
		p.mu.Unlock()
		select {
		case p.wake <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// close closes the connection at once and waits for the reader.
func (p *Peer) close() {
	_ = p.ws.CloseNow()
	<-p.done
}

// note adds one line to the peer's log of exchanged frames.
func (p *Peer) note(line string) {
	const keep = 14
	p.log = append(p.log, clip(line, 400))
	if len(p.log) > keep {
		p.log = p.log[len(p.log)-keep:]
	}
}

func (p *Peer) recent() []string {
	out := make([]string, 0, len(p.log)+1)
	out = append(out, p.name+":")
	return append(out, p.log...)
}

// fail ends the scenario with a failure that shows what was expected, what was received and
// the last frames of this connection.
func (p *Peer) fail(msg, expected, received string) {
	p.t.fail(&Failure{Message: msg, Expected: expected, Received: received, Frames: p.recent()})
}

// sendRaw sends one text frame.
func (p *Peer) sendRaw(s string) {
	p.note("→ " + s)
	ctx, cancel := context.WithTimeout(p.t.ctx, p.t.cfg.Timeout)
	defer cancel()
	if err := p.ws.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
		p.fail(fmt.Sprintf("write: %v", err), "", "")
	}
}

// send sends v as one JSON text frame.
func (p *Peer) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		p.t.Fatalf("marshal: %v", err)
	}
	p.sendRaw(string(b))
}

// sendBinary sends one binary frame.
func (p *Peer) sendBinary(b []byte) {
	p.note(fmt.Sprintf("→ (binary) %q", clip(string(b), 200)))
	ctx, cancel := context.WithTimeout(p.t.ctx, p.t.cfg.Timeout)
	defer cancel()
	if err := p.ws.Write(ctx, websocket.MessageBinary, b); err != nil {
		p.fail(fmt.Sprintf("write: %v", err), "", "")
	}
}

// errTimeout is returned by poll when nothing arrived in time.
var errTimeout = errors.New("timeout")

// poll waits up to d for the next message. It returns the message, or the read error once the
// connection has ended, or errTimeout.
func (p *Peer) poll(d time.Duration) ([]byte, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		p.mu.Lock()
		if len(p.queue) > 0 {
			data := p.queue[0]
			p.queue = p.queue[1:]
			p.mu.Unlock()
			return data, nil
		}
		err := p.rerr
		p.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-p.wake:
		case <-timer.C:
			return nil, errTimeout
		case <-p.t.ctx.Done():
			return nil, p.t.ctx.Err()
		}
	}
}

// next returns the next frame, waiting at most the configured timeout. what says what the
// scenario waits for; a silent server or a closed connection fails the scenario with it. Each
// frame is checked against the schema and the shape's grammar first.
func (p *Peer) next(what string) Frame {
	if f, ok := p.takeHeld(); ok {
		return f
	}
	for p.within != nil {
		f := p.read1(what)
		if lane := f.Str("stream_id"); lane == *p.within {
			return f
		}
		p.held = append(p.held, f)
	}
	return p.read1(what)
}

// read1 reads and checks the next frame off the connection.
func (p *Peer) read1(what string) Frame {
	data, err := p.poll(p.t.cfg.Timeout)
	switch {
	case errors.Is(err, errTimeout):
		p.fail(fmt.Sprintf("no frame within %v while waiting for %s", p.t.cfg.Timeout, what), what, "nothing: the server stopped answering")
	case err != nil:
		p.fail(fmt.Sprintf("connection ended while waiting for %s: %v", what, err), what, closeText(err))
	}
	return p.accept(data)
}

// accept decodes and checks one received message.
func (p *Peer) accept(data []byte) Frame {
	f, err := decodeFrame(data)
	if err != nil {
		p.note("← " + string(data))
		p.fail(fmt.Sprintf("the server sent a frame that is not a JSON object: %v", err), "a JSON object", clip(string(data), 400))
	}
	p.lastRaw = data
	p.note("← " + show(f, data))
	if p.t.r.schema != nil {
		if err := p.t.r.schema.validateEvent(f, data, true); err != nil {
			p.fail("schema: "+err.Error(), "a frame valid against the Open Responses schema", clip(show(f, data), 600))
		}
	}
	if v := p.grammar(f.Str("stream_id")).feed(f); v != "" {
		p.fail("grammar: "+v, "", clip(show(f, data), 600))
	}
	return f
}

// show is a received frame for a report: its JSON, preceded by its type unless the JSON
// starts with it (reports clip long frames).
func show(f Frame, data []byte) string {
	if bytes.HasPrefix(data, []byte(`{"type":`)) {
		return string(data)
	}
	return fmt.Sprintf("(%s) %s", f.Type(), data)
}

func closeText(err error) string {
	if c := websocket.CloseStatus(err); c != -1 {
		return fmt.Sprintf("close %d (%s)", int(c), c)
	}
	return err.Error()
}

// expectEvent reads the next frame and checks that it is an event of type typ whose members
// include want (a partial object: only the members given are compared; nil for none).
func (p *Peer) expectEvent(typ string, want M) Frame {
	f := p.next(typ)
	exp := M{"type": typ}
	for k, v := range want {
		exp[k] = v
	}
	if f.Type() != typ || !contains(f, exp) {
		p.fail("unexpected frame", compact(exp), clip(show(f, p.lastRaw), 800))
	}
	return f
}

// expectError reads the next frame and checks that it is the error envelope with status, code
// and param ("" for null): {"type":"error","status":N,"error":{"type","code","message","param"}}.
func (p *Peer) expectError(status int, code, param string) Frame {
	want := errorFrame(status, code, param)
	f := p.next("error " + code)
	if !contains(f, want) {
		p.fail("unexpected frame", compact(want), clip(show(f, p.lastRaw), 800))
	}
	return f
}

// errorFrame is the partial error envelope expectError compares.
func errorFrame(status int, code, param string) M {
	var pv any
	if param != "" {
		pv = param
	}
	return M{"type": "error", "status": status, "error": M{"code": code, "param": pv}}
}

// expectErrorAmid reads past the frames of a sampling response (still checked) to the next
// error frame, which must match. Error frames are written as soon as a bad frame is read, so
// they may arrive between the events of a response.
func (p *Peer) expectErrorAmid(status int, code, param string) Frame {
	want := errorFrame(status, code, param)
	for {
		f := p.next("error " + code)
		if f.Type() != "error" {
			continue
		}
		if !contains(f, want) {
			p.fail("unexpected error frame", compact(want), clip(show(f, p.lastRaw), 800))
		}
		return f
	}
}

// expectNothing checks that the server sends nothing for a short while.
func (p *Peer) expectNothing() {
	data, err := p.poll(quiet)
	switch {
	case errors.Is(err, errTimeout):
		return
	case err != nil:
		p.fail("connection ended while expecting nothing", "nothing", closeText(err))
	}
	f := p.accept(data)
	p.fail(fmt.Sprintf("expected no frame for %v", quiet), "nothing", clip(show(f, data), 800))
}

// expectClose checks that the server closes the connection with code and sends nothing before.
func (p *Peer) expectClose(code websocket.StatusCode) {
	data, err := p.poll(p.t.cfg.Timeout)
	switch {
	case errors.Is(err, errTimeout):
		p.fail(fmt.Sprintf("the connection is still open after %v", p.t.cfg.Timeout), fmt.Sprintf("close %d", code), "nothing")
	case err == nil:
		f := p.accept(data)
		p.fail("a frame before the close", fmt.Sprintf("close %d", code), clip(show(f, data), 800))
	case websocket.CloseStatus(err) != code:
		p.fail("wrong close", fmt.Sprintf("close %d (%s)", code, code), closeText(err))
	}
	p.note(fmt.Sprintf("× close %d", code))
}

// until reads frames up to and including the first for which stop is true. An error frame on
// the way fails the scenario.
func (p *Peer) until(what string, stop func(Frame) bool) []Frame {
	var fs []Frame
	for {
		f := p.next(what)
		fs = append(fs, f)
		if stop(f) {
			return fs
		}
		if f.Type() == "error" {
			p.fail("unexpected error frame while waiting for "+what, what, clip(show(f, p.lastRaw), 800))
		}
	}
}

// contains reports whether got includes every member of want (recursively; arrays must have
// the same length and match element by element; numbers compare by value).
func contains(got any, want any) bool {
	return containsNorm(normalize(got), normalize(want))
}

func containsNorm(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, present := g[k]
			if !present || !containsNorm(gv, wv) { // a null in want means "present and null"
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !containsNorm(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return compact(got) == compact(want)
}
