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
	"syscall"
	"time"

	"github.com/tetherd/tether/internal/wsguard"

	"github.com/coder/websocket"
)

const mib = 1 << 20

// toolCreate is an append-shape response.create that suspends at one call, with a tool whose
// description is n bytes.
func toolCreate(n int, frame bool) []byte {
	m := map[string]any{"model": "sim", "input": "run it", "metadata": map[string]string{"sim.calls": "1"},
		"tools": []any{map[string]any{"type": "function", "name": "exec_command", "description": strings.Repeat("d", n),
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}}}}
	if frame {
		m["type"] = "response.create"
	}
	b, _ := json.Marshal(m)
	return b
}

func dialWS(ctx context.Context, base, key string, appendShape bool) (*websocket.Conn, string) {
	h := http.Header{}
	if appendShape {
		h.Set("OpenAI-Beta", "responses_append=v1")
	}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/responses", &websocket.DialOptions{HTTPHeader: h, HTTPClient: wsguard.Client(nil)})
	if err != nil {
		if resp != nil {
			return nil, fmt.Sprintf("upgrade %d", resp.StatusCode)
		}
		return nil, "upgrade failed"
	}
	c.SetReadLimit(-1)
	return c, ""
}

// nextOf reads frames until one of the types (or an error frame) and names the outcome.
func nextOf(ctx context.Context, c *websocket.Conn, types ...string) string {
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return "ws closed"
		}
		var f struct {
			Type  string `json:"type"`
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &f)
		if f.Type == "error" {
			return "ws error " + f.Error.Code
		}
		for _, t := range types {
			if f.Type == t {
				return "ws " + t
			}
		}
	}
}

var client = &http.Client{Timeout: 2 * time.Minute}

// post sends body to POST /v1/responses and names the outcome ("200", "503 server_overloaded").
func post(ctx context.Context, base, key string, body []byte) (string, map[string]any) {
	return postTo(ctx, base, key, "/v1/responses", body)
}

// postTo sends body to POST path and names the outcome.
func postTo(ctx context.Context, base, key, path string, body []byte) (string, map[string]any) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return outcome(client.Do(req))
}

func get(ctx context.Context, base, key, path string) string {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	o, _ := outcome(client.Do(req))
	return o
}

func outcome(resp *http.Response, err error) (string, map[string]any) {
	if err != nil {
		return "request failed", nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	if resp.StatusCode == 200 {
		return "200", m
	}
	e, _ := m["error"].(map[string]any)
	code, _ := e["code"].(string)
	return fmt.Sprintf("%d %s", resp.StatusCode, code), m
}

func attackTools(ctx context.Context, e *env) {
	c, fail := dialWS(ctx, e.base, "", true)
	if c == nil {
		e.count(fail)
		return
	}
	defer c.CloseNow()
	frame := toolCreate(e.size(24*mib), true)
	for range e.n(64) {
		if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
			e.count("ws closed")
			return
		}
		e.count(nextOf(ctx, c, "response.done", "response.completed"))
	}
	time.Sleep(e.hold)
}

func attackStore(ctx context.Context, e *env) {
	body := toolCreate(e.size(24*mib), false)
	for range e.n(146) {
		o, _ := post(ctx, e.base, "", body)
		e.count(o)
	}
	time.Sleep(e.hold)
}

func attackDecode(ctx context.Context, e *env) {
	var b bytes.Buffer
	b.WriteString(`{"model":"sim","input":[`)
	for i := 0; b.Len() < e.size(32*mib)-64; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":"user","content":"x"}`)
	}
	b.WriteString(`]}`)
	body := b.Bytes()
	var wg sync.WaitGroup
	for range max(e.n(8), 4) {
		wg.Go(func() {
			o, _ := post(ctx, e.base, "", body)
			e.count(o)
		})
	}
	wg.Wait()
}

func attackIdleWS(ctx context.Context, e *env) {
	frame := []byte(`{"type":"response.processed","response_id":"resp_x","event_id":"` + strings.Repeat("x", e.size(31*mib)) + `"}`)
	var conns []*websocket.Conn
	var wg sync.WaitGroup
	for range e.n(103) {
		c, fail := dialWS(ctx, e.base, "", true)
		if c == nil {
			e.count(fail)
			continue
		}
		conns = append(conns, c)
		if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
			e.count("ws closed")
			continue
		}
		e.count("frame sent")
		wg.Go(func() { // read (and answer pings) until closed
			if o := nextOf(ctx, c); o != "ws closed" {
				e.count(o)
			}
		})
	}
	time.Sleep(e.hold)
	for _, c := range conns {
		_ = c.CloseNow()
	}
	wg.Wait()
}

func attackStalled(ctx context.Context, e *env) {
	size := e.size(32 * mib)
	body := append([]byte(`{"model":"sim","input":"`), bytes.Repeat([]byte("x"), size-1000-24)...)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	for range e.n(141) {
		wg.Go(func() {
			c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
			if err != nil {
				e.count("dial failed")
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			fmt.Fprintf(c, "POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
			_ = c.SetWriteDeadline(time.Now().Add(e.hold + 10*time.Second))
			if _, err := c.Write(body); err != nil {
				e.count("body refused before the end")
			}
		})
	}
	wg.Wait()
	time.Sleep(e.hold)
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		switch {
		case err == nil:
			e.count(fmt.Sprintf("answered %d", resp.StatusCode))
		case isTimeout(err):
			e.count("still open, no answer")
		default:
			e.count("closed")
		}
		_ = c.Close()
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func attackKeepAlive(ctx context.Context, e *env) {
	addr := strings.TrimPrefix(e.base, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	n := e.n(20000)
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur > 512 && uint64(n) > lim.Cur-256 {
		n = int(lim.Cur - 256) // leave this process descriptors for the probe and the last POST
	}
	for range n {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			e.count("dial failed")
			continue
		}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			e.count("closed")
			continue
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			e.count("closed")
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		e.count(fmt.Sprintf("%d, then idle", resp.StatusCode))
	}
	time.Sleep(e.hold)
	open := 0
	one := make([]byte, 1)
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(one); isTimeout(err) {
			open++
		}
	}
	o, _ := post(ctx, e.base, "", []byte(`{"model":"sim","input":"hi"}`))
	e.note = fmt.Sprintf("idle connections the server still holds: %d of %d; a fresh POST after the attack: %s", open, len(conns), o)
}

func attackStarve(ctx context.Context, e *env) {
	o, a := post(ctx, e.base, "key-a", []byte(`{"model":"sim","input":"keep me"}`))
	id, _ := a["id"].(string)
	if o != "200" || id == "" {
		e.note = "key A's first POST: " + o
		return
	}
	var wg sync.WaitGroup
	work := make(chan struct{})
	for range 16 {
		wg.Go(func() {
			for range work {
				o, _ := post(ctx, e.base, "key-b", []byte(`{"model":"sim","input":"flood"}`))
				e.count("B POST " + o)
			}
		})
	}
	for range e.n(10000) {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	e.count("B GET of A's id " + get(ctx, e.base, "key-b", "/v1/responses/"+id))
	notes := []string{"A's stored response after B's flood: " + get(ctx, e.base, "key-a", "/v1/responses/"+id)}
	// B holds suspended rollouts over many connections, then A creates one.
	var conns []*websocket.Conn
	frame := toolCreate(16, true)
	total := e.n(10000)
	perConn := 63
	for held := 0; held < total; {
		c, fail := dialWS(ctx, e.base, "key-b", true)
		if c == nil {
			e.count("B " + fail)
			break
		}
		conns = append(conns, c)
		refused := false
		for i := 0; i < perConn && held < total; i++ {
			_ = c.Write(ctx, websocket.MessageText, frame)
			o := nextOf(ctx, c, "response.done", "response.completed")
			e.count("B create " + o)
			if o != "ws response.done" {
				refused = true
				break
			}
			held++
		}
		if refused {
			break
		}
	}
	ao, _ := post(ctx, e.base, "key-a", toolCreate(16, false))
	notes = append(notes, "A's POST while B holds rollouts: "+ao)
	e.note = strings.Join(notes, "; ")
	for _, c := range conns {
		_ = c.CloseNow()
	}
}

// manyMessages is a body for path of about size bytes of tiny messages (chat) or items.
func manyMessages(path string, size int) []byte {
	var b bytes.Buffer
	if path == "/v1/chat/completions" {
		b.WriteString(`{"model":"sim","messages":[`)
	} else {
		b.WriteString(`{"model":"sim","input":[`)
	}
	for i := 0; b.Len() < size-64; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":"user","content":"x"}`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// attackBodies posts bodies of about 32 MiB of tiny messages to path on n connections, again
// and again for the hold time, while a victim makes small creates.
func attackBodies(ctx context.Context, e *env, path string, n int) {
	body := manyMessages(path, e.size(32*mib))
	end := time.Now().Add(e.hold)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for first := true; first || time.Now().Before(end); first = false {
				o, _ := postTo(ctx, e.base, "", path, body)
				e.count(o)
			}
		})
	}
	wg.Wait()
}

func attackChatBody(ctx context.Context, e *env) {
	attackBodies(ctx, e, "/v1/chat/completions", max(e.n(12), 3))
}

func attackCompactBody(ctx context.Context, e *env) {
	attackBodies(ctx, e, "/v1/responses/compact", max(e.n(24), 6))
}

// attackHeaderOnly opens POSTs that send their headers (Content-Length: 100) and no body, and
// holds them while a victim makes small creates.
func attackHeaderOnly(ctx context.Context, e *env) {
	holdRequests(e, "header-only", "POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
}

// attackKeyShare: key B opens POSTs that send their headers (Content-Length: 100) and the
// body's first byte, each holding a decoding slot until -read-timeout, more than there are
// slots; key A (the victim) makes small creates meanwhile.
func attackKeyShare(ctx context.Context, e *env) {
	holdRequests(e, "key B", "POST /v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-b\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
}

// holdRequests opens e.n(280) connections that each send head (a request never finished),
// holds them for e.hold, then counts how each ended: "<who> answered <status>", "<who> still
// open" or "<who> closed".
func holdRequests(e *env, who, head string) {
	var conns []net.Conn
	for range e.n(280) {
		c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
		if err != nil {
			e.count("dial failed")
			continue
		}
		conns = append(conns, c)
		fmt.Fprint(c, head)
	}
	time.Sleep(e.hold)
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		switch {
		case err == nil:
			e.count(fmt.Sprintf("%s answered %d", who, resp.StatusCode))
		case isTimeout(err):
			e.count(who + " still open")
		default:
			e.count(who + " closed")
		}
		_ = c.Close()
	}
}

// attackGetUnread stores one response with a 24 MiB tool description, then GETs it on many
// connections that never read, while a victim makes small creates.
func attackGetUnread(ctx context.Context, e *env) {
	o, r := post(ctx, e.base, "", toolCreate(e.size(24*mib), false))
	if o != "200" {
		e.note = "the stored create: " + o
		return
	}
	id, _ := r["id"].(string)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range e.n(60) {
		c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
		if err != nil {
			e.count("dial failed")
			continue
		}
		_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /v1/responses/%s HTTP/1.1\r\nHost: x\r\n\r\n", id)
		e.count("unread GET sent")
	}
	time.Sleep(e.hold)
}

// attackUnreadWS opens WebSockets that never read (a 4 KiB receive buffer) and on each creates
// a response with 4 MiB of instructions, which every event of the response echoes; a victim
// makes small creates meanwhile.
func attackUnreadWS(ctx context.Context, e *env) {
	d := &net.Dialer{}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
		}
		return c, err
	}}}
	defer hc.CloseIdleConnections()
	frame, _ := json.Marshal(map[string]any{"type": "response.create", "model": "sim", "input": "x", "instructions": strings.Repeat("i", e.size(4*mib))})
	var conns []*websocket.Conn
	for range e.n(100) {
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.base, "http")+"/v1/responses", &websocket.DialOptions{HTTPClient: wsguard.Client(hc)})
		if err != nil {
			e.count("upgrade failed")
			continue
		}
		conns = append(conns, c)
		if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
			e.count("create not sent")
			continue
		}
		e.count("unread create sent")
	}
	time.Sleep(e.hold)
	for _, c := range conns {
		_ = c.CloseNow()
	}
}

// attackImageOutputs makes creates whose input is a function call and its output as one
// 16 MiB input_image part, on 4 connections at a time, while a victim makes small creates.
func attackImageOutputs(ctx context.Context, e *env) {
	url := "data:image/png;base64," + strings.Repeat("A", e.size(16*mib))
	body, _ := json.Marshal(map[string]any{"model": "sim", "store": true, "input": []any{
		map[string]any{"type": "function_call", "call_id": "call_1", "name": "shot", "arguments": "{}"},
		map[string]any{"type": "function_call_output", "call_id": "call_1", "output": []any{
			map[string]any{"type": "input_image", "image_url": url},
		}},
	}})
	n := e.n(60)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				o, _ := post(ctx, e.base, "", body)
				e.count(o)
			}
		})
	}
	wg.Wait()
}

// attackManyWS opens idle WebSockets (10,000 at scale 1), each costing the server its
// connection state, and holds them.
func attackManyWS(ctx context.Context, e *env) {
	var conns []*websocket.Conn
	defer func() {
		for _, c := range conns {
			_ = c.CloseNow()
		}
	}()
	n := e.n(10000)
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur > 512 && uint64(n) > lim.Cur-256 {
		n = int(lim.Cur - 256) // leave this process descriptors for the probe and the victim
	}
	for range n {
		c, fail := dialWS(ctx, e.base, "", true)
		if c == nil {
			e.count(fail)
			continue
		}
		conns = append(conns, c)
		e.count("open, idle")
	}
	time.Sleep(e.hold)
}

// attackSchema sends creates whose text.format json_schema has 80,000 properties (about 2 MB),
// which took 52 CPU-seconds each to compile before schemas were bounded; a victim makes small
// creates meanwhile. The note gives the slowest answer.
func attackSchema(ctx context.Context, e *env) {
	var b strings.Builder
	b.WriteString(`{"model":"sim","input":"hi","text":{"format":{"type":"json_schema","name":"big","schema":{"type":"object","properties":{`)
	for i := range 80000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string"}`, i)
	}
	b.WriteString(`}}}}}`)
	timedPosts(ctx, e, []byte(b.String()), max(e.n(8), 2))
}

// attackSimSchema sends 300-byte creates whose schema asks the sim for nested arrays of at
// least 100 items four deep (10⁸ values) of strings of at least 300,000 characters, with
// max_output_tokens 100 and without; before the sim's answer was bounded by the step's output,
// one took 67 s and 1.7 GiB. The note gives the slowest answer.
func attackSimSchema(ctx context.Context, e *env) {
	schema := `{"type":"string","minLength":300000}`
	for range 4 {
		schema = `{"type":"array","minItems":100,"items":` + schema + `}`
	}
	n := max(e.n(8), 2)
	var wg sync.WaitGroup
	for i := range n {
		limit := ""
		if i%2 == 0 {
			limit = `,"max_output_tokens":100`
		}
		body := []byte(`{"model":"sim","input":"hi"` + limit + `,"text":{"format":{"type":"json_schema","name":"deep","schema":` +
			`{"type":"object","properties":{"v":` + schema + `},"required":["v"]}}}}`)
		wg.Go(func() { timedPosts(ctx, e, body, 1) })
	}
	wg.Wait()
}

// timedPosts sends body n times at once and counts each answer by its outcome, with the
// Response's status for a 200; the note keeps the slowest answer's time.
func timedPosts(ctx context.Context, e *env, body []byte, n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			start := time.Now()
			o, m := post(ctx, e.base, "", body)
			if st, ok := m["status"].(string); ok && o == "200" {
				o += " " + st
			}
			e.count(o)
			e.slowest(time.Since(start))
		})
	}
	wg.Wait()
}
