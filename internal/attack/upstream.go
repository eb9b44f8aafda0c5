package attack

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// attackInput marks the attackers' requests: a fault upstream misbehaves only for a request
// whose input holds it, and answers every other one (the victim's) normally.
const attackInput = "attack the upstream"

// upstreamFault is a misbehaving upstream: the server under attack runs with -backend
// (chat or responses) and -upstream at it.
type upstreamFault struct {
	backend string // "chat" or "responses"
	// stream writes the fault to the attacker's request (chat: SSE bytes to w; responses:
	// frames through send) until a write fails; size scales its sizes.
	chat      func(w io.Writer, size func(int) int) error
	responses func(send func(string) error, size func(int) int) error
	// maxTokens, when set, makes every other attacker's request carry max_output_tokens 100.
	maxTokens bool
}

// Chat Completions chunks of the faults.
const (
	chatText     = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word \"}}]}\n\n"
	chatCallHead = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"exec_command\",\"arguments\":\"{\\\"cmd\\\":\\\"\"}}]}}]}\n\n"
	chatArgs     = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"xxxxxxxxxxxxxxxx\"}}]}}]}\n\n"
	chatDone     = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
)

// repeat writes s to w until a write fails.
func repeat(w io.Writer, s string) error {
	b := []byte(strings.Repeat(s, max(1, (32<<10)/len(s))))
	for {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
}

// fill writes n bytes of c to w.
func fill(w io.Writer, c byte, n int) error {
	b := bytes.Repeat([]byte{c}, 64<<10)
	for n > 0 {
		k := min(n, len(b))
		if _, err := w.Write(b[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// upstreamFaults are the attacks that put a misbehaving upstream behind the server.
var upstreamFaults = map[string]upstreamFault{
	// endless text deltas; every other request has max_output_tokens 100
	"chat-text": {backend: "chat", maxTokens: true, chat: func(w io.Writer, _ func(int) int) error { return repeat(w, chatText) }},
	// one tool call whose arguments never end
	"chat-args": {backend: "chat", chat: func(w io.Writer, _ func(int) int) error {
		if _, err := io.WriteString(w, chatCallHead); err != nil {
			return err
		}
		return repeat(w, chatArgs)
	}},
	// one SSE line of 1 GiB that never ends, then silence
	"chat-line": {backend: "chat", chat: func(w io.Writer, size func(int) int) error {
		if _, err := io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\""); err != nil {
			return err
		}
		return fill(w, 'x', size(1<<30))
	}},
	// data: lines that never end an event
	"chat-event": {backend: "chat", chat: func(w io.Writer, _ func(int) int) error { return repeat(w, "data: x\n") }},
	// one valid chunk of 300 MiB of text, then a proper end
	"chat-chunk": {backend: "chat", chat: func(w io.Writer, size func(int) int) error {
		if _, err := io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\""); err != nil {
			return err
		}
		if err := fill(w, 'y', size(300<<20)); err != nil {
			return err
		}
		_, err := io.WriteString(w, "\"}}]}\n\n"+chatDone)
		return err
	}},
	// endless text deltas of a Responses upstream; every other request has max_output_tokens 100
	"resp-deltas": {backend: "responses", maxTokens: true, responses: func(send func(string) error, _ func(int) int) error {
		if err := send(respMessage); err != nil {
			return err
		}
		for {
			if err := send(respWord); err != nil {
				return err
			}
		}
	}},
	// text deltas of 60 MiB each
	"resp-huge": {backend: "responses", responses: func(send func(string) error, size func(int) int) error {
		if err := send(respMessage); err != nil {
			return err
		}
		huge := eventFrame("response.output_text.delta", map[string]any{"delta": strings.Repeat("y", size(60<<20))})
		for {
			if err := send(huge); err != nil {
				return err
			}
		}
	}},
}

// Responses upstream frames.
var (
	respMessage = eventFrame("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"type": "message", "role": "assistant"}})
	respWord    = eventFrame("response.output_text.delta", map[string]any{"delta": "word "})
)

func eventFrame(typ string, fields map[string]any) string {
	m := map[string]any{"type": typ}
	for k, v := range fields {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// faultUpstream serves one upstreamFault on a loopback port: the fault to the attackers'
// requests, a short normal answer to every other request. It counts what it served.
type faultUpstream struct {
	f      upstreamFault
	size   func(int) int
	ln     net.Listener
	hs     *http.Server
	wg     sync.WaitGroup // Serve and the handlers
	bytes  atomic.Int64   // written to attackers' streams
	faults atomic.Int64   // attackers' requests served
	cut    atomic.Int64   // of those, streams the server under attack closed
}

// startUpstream starts f on a loopback port.
func startUpstream(f upstreamFault, size func(int) int) (*faultUpstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &faultUpstream{f: f, size: size, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", u.chat)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"status":"ok"}`) })
	mux.HandleFunc("/v1/responses", u.responses)
	u.hs = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	u.wg.Go(func() { _ = u.hs.Serve(ln) })
	return u, nil
}

// serveArgs are the server's flags that put it behind u.
func (u *faultUpstream) serveArgs() []string {
	base := "http://" + u.ln.Addr().String() + "/v1"
	if u.f.backend == "responses" {
		base = "ws://" + u.ln.Addr().String() + "/v1/responses"
	}
	return []string{"-backend", u.f.backend, "-upstream", base}
}

// stop closes the upstream and waits for its handlers; a WebSocket handler ends when its
// peer, the server under attack, has gone (stop it first).
func (u *faultUpstream) stop() {
	_ = u.hs.Close()
	u.wg.Wait()
}

// note tells what the upstream served.
func (u *faultUpstream) note() string {
	return fmt.Sprintf("upstream: %d attacker streams, %d cut by the server, %.0f MiB written to them",
		u.faults.Load(), u.cut.Load(), float64(u.bytes.Load())/mib)
}

// countingWriter counts bytes written through it and flushes after each write.
type countingWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	n  *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	if err == nil {
		err = c.rc.Flush()
	}
	return n, err
}

func (u *faultUpstream) chat(w http.ResponseWriter, r *http.Request) {
	u.wg.Add(1)
	defer u.wg.Done()
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	w.Header().Set("Content-Type", "text/event-stream")
	if !bytes.Contains(body, []byte(attackInput)) {
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello\"}}]}\n\n"+chatDone)
		return
	}
	u.faults.Add(1)
	cw := countingWriter{w: w, rc: http.NewResponseController(w), n: &u.bytes}
	if err := u.f.chat(cw, u.size); err != nil {
		u.cut.Add(1)
		return
	}
	<-r.Context().Done() // then silence, until the server gives up
	u.cut.Add(1)
}

func (u *faultUpstream) responses(w http.ResponseWriter, r *http.Request) {
	u.wg.Add(1)
	defer u.wg.Done()
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	ctx := r.Context()
	for n := 0; ; n++ {
		_, req, err := c.Read(ctx)
		if err != nil {
			return
		}
		id := fmt.Sprintf("resp_up%d", n)
		if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.created","response":{"id":"`+id+`","status":"in_progress"}}`)); err != nil {
			return
		}
		if bytes.Contains(req, []byte(attackInput)) {
			u.faults.Add(1)
			rctx := c.CloseRead(ctx) // the server's close ends rctx
			_ = u.f.responses(func(s string) error {
				err := c.Write(rctx, websocket.MessageText, []byte(s))
				if err == nil {
					u.bytes.Add(int64(len(s)))
				}
				return err
			}, u.size)
			u.cut.Add(1)
			return
		}
		for _, f := range []string{respMessage, eventFrame("response.output_text.delta", map[string]any{"delta": "hello"}),
			`{"type":"response.completed","response":{"id":"` + id + `","status":"completed","usage":{"input_tokens":1,"output_tokens":1}}}`} {
			if err := c.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
				return
			}
		}
	}
}

// attackUpstream makes streamed creates (8 at scale 1, 2 at least) whose upstream misbehaves (the fault of e.upstream)
// at once, and counts each client's terminal event: "terminal response.failed server_error
// (upstream named)", "terminal response.incomplete max_output_tokens", or "no terminal event".
func attackUpstream(ctx context.Context, e *env) {
	f := e.up.f
	var wg sync.WaitGroup
	for i := range max(e.n(8), 2) {
		wg.Go(func() {
			m := map[string]any{"model": "m", "input": attackInput, "stream": true, "store": false}
			if f.maxTokens && i%2 == 0 {
				m["max_output_tokens"] = 100
			}
			body, _ := json.Marshal(m)
			e.count(streamTerminal(ctx, e.base, body))
		})
	}
	wg.Wait()
	// The server ends an attacker's stream upstream as it fails the step: wait for the
	// upstream to see every stream closed (or 10 s) before telling what it served.
	for end := time.Now().Add(10 * time.Second); e.up.cut.Load() < e.up.faults.Load() && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	e.note = e.up.note()
}

// streamTerminal posts a streamed create and names its terminal event.
func streamTerminal(ctx context.Context, base string, body []byte) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/responses", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "request failed"
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		o, _ := outcome(resp, nil)
		return o
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "no terminal event (the stream ended)"
		}
		data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: ")
		if !ok || strings.Contains(data[:min(len(data), 64)], "delta") {
			continue // a delta is not terminal: no need to decode it
		}
		var ev struct {
			Type     string
			Error    *struct{ Code, Message string } // of an error event
			Response struct {
				Error             *struct{ Code, Message string }
				IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
			}
		}
		_ = json.Unmarshal([]byte(data), &ev)
		switch ev.Type {
		case "response.completed":
			return "terminal response.completed"
		case "response.incomplete":
			reason := ""
			if d := ev.Response.IncompleteDetails; d != nil {
				reason = d.Reason
			}
			return "terminal response.incomplete " + reason
		case "response.failed", "error":
			code, named := "", ""
			d := ev.Response.Error
			if d == nil {
				d = ev.Error
			}
			if d != nil {
				code = d.Code
				if strings.Contains(d.Message, "upstream") {
					named = " (upstream named)"
				}
			}
			return "terminal " + ev.Type + " " + code + named
		}
	}
}
