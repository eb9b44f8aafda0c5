package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/tetherd/tether/internal/wsguard"

	"github.com/coder/websocket"
	"github.com/tetherd/tether/internal/chatwire"
	"github.com/tetherd/tether/internal/peer"
)

// appendBeta is the OpenAI-Beta value that opts a WebSocket into the append shape.
const appendBeta = "responses_append=v1"

// counter counts the bytes the client wrote on its connections (HTTP headers, bodies,
// WebSocket frame headers and masks included).
type counter struct{ n atomic.Int64 }

type countConn struct {
	net.Conn
	c *counter
}

func (c countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.c.n.Add(int64(n))
	return n, err
}

// newHTTPClient returns a keep-alive HTTP/1.1 client whose connections count written bytes
// into cnt.
func newHTTPClient(cnt *counter) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetNoDelay(true)
			}
			return countConn{Conn: c, c: cnt}, nil
		},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: tr}
}

// usage is a step's (or a sum of steps') token usage.
type usage struct {
	Input   int `json:"input_tokens"`
	Details struct {
		Cached int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	Output int `json:"output_tokens"`
}

func (u usage) minus(v usage) usage {
	u.Input -= v.Input
	u.Details.Cached -= v.Details.Cached
	u.Output -= v.Output
	return u
}

// turnResult is what one turn of a rollout measured and returned.
type turnResult struct {
	overhead   time.Duration // first byte written → first response.output_item.added
	total      time.Duration // first byte written → the turn's last event
	responseID string
	calls      []call // the function calls the turn ended with
	final      bool   // the rollout ended (answer)
	usage      usage  // this turn's sampling step
	events     int    // events received

	// Engine mode (see engine.go).
	output     []json.RawMessage // public shape: the Response's output items
	incomplete string            // the turn ended incomplete: the reason
	suspended  bool              // append: the rollout is suspended at the calls (response.done)
	message    chatwire.Message  // engine transport: the assistant message of the turn
}

// driver runs one rollout's turns over one transport.
type driver interface {
	// turn sends payload (built by the caller) and reads until the turn ends.
	turn(ctx context.Context, payload []byte) (turnResult, error)
	close()
}

// endEvent is the part of a turn's last event the bench reads.
type endEvent struct {
	Type           string            `json:"type"`
	ResponseID     string            `json:"response_id"`
	PendingCallIDs []string          `json:"pending_call_ids"`
	Output         []json.RawMessage `json:"output"`
	Usage          *usage            `json:"usage"`
	Response       *struct {
		ID                string            `json:"id"`
		Status            string            `json:"status"`
		Output            []json.RawMessage `json:"output"`
		Usage             *usage            `json:"usage"`
		Error             json.RawMessage   `json:"error"`
		IncompleteDetails json.RawMessage   `json:"incomplete_details"`
	} `json:"response"`
}

// finishPublic fills res from a public-shape segment's terminal event (WebSocket or SSE). With
// engine, a response.incomplete is a turn too (its reason in res.incomplete).
func finishPublic(res *turnResult, data []byte, engine bool) error {
	var ev endEvent
	if err := json.Unmarshal(data, &ev); err != nil || ev.Response == nil {
		return fmt.Errorf("bad terminal event %.200s: %v", data, err)
	}
	if engine && ev.Type == "response.incomplete" {
		var d struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(ev.Response.IncompleteDetails, &d)
		res.incomplete = d.Reason
		if res.incomplete == "" {
			res.incomplete = "unknown reason"
		}
	} else if ev.Type != "response.completed" {
		return fmt.Errorf("response %s ended %s: error %s, incomplete_details %s", ev.Response.ID,
			ev.Response.Status, ev.Response.Error, ev.Response.IncompleteDetails)
	}
	res.responseID = ev.Response.ID
	if ev.Response.Usage != nil {
		res.usage = *ev.Response.Usage
	}
	calls, answered, err := parseOutput(ev.Response.Output)
	if err != nil {
		return err
	}
	res.calls = calls
	res.final = answered || len(calls) == 0
	res.output = ev.Response.Output
	return nil
}

// parseOutput returns the function calls among output items (but calls cut off before they
// were complete, which are never run), and whether there is a message.
func parseOutput(items []json.RawMessage) (calls []call, message bool, err error) {
	for _, raw := range items {
		var it struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal(raw, &it); err != nil {
			return nil, false, fmt.Errorf("bad output item %.200s: %w", raw, err)
		}
		switch it.Type {
		case "function_call":
			if it.Status == "incomplete" {
				continue
			}
			calls = append(calls, call{id: it.CallID, item: append(json.RawMessage(nil), raw...)})
		case "message":
			message = true
		}
	}
	return calls, message, nil
}

// wsDriver drives the public shape (ws) or the append shape over one WebSocket.
type wsDriver struct {
	c        *websocket.Conn
	isAppend bool
	engine   bool  // engine mode: incomplete turns are turns
	cum      usage // append: cumulative usage of the rollout so far
	// seen holds the call ids of the append rollout returned by earlier turns (answered): its
	// terminal Response lists every item of the rollout, those calls included.
	seen map[string]bool
}

func dialWS(ctx context.Context, url, apiKey string, appendShape bool, hc *http.Client) (*websocket.Conn, error) {
	h := http.Header{}
	if appendShape {
		h.Set("OpenAI-Beta", appendBeta)
	}
	if apiKey != "" {
		h.Set("Authorization", "Bearer "+apiKey)
	}
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h, HTTPClient: wsguard.Client(hc),
		CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	c.SetReadLimit(-1)
	if appendShape && resp.Header.Get("OpenAI-Beta") != appendBeta {
		_ = c.CloseNow()
		return nil, fmt.Errorf("dial %s: the server did not confirm OpenAI-Beta: %s", url, appendBeta)
	}
	return c, nil
}

func (d *wsDriver) close() { _ = d.c.Close(websocket.StatusNormalClosure, "bench done") }

func (d *wsDriver) turn(ctx context.Context, payload []byte) (turnResult, error) {
	var res turnResult
	if d.isAppend && peer.EventType(payload) == "response.create" {
		d.cum = usage{} // a new rollout: its usage counts from zero
		d.seen = map[string]bool{}
	}
	t0 := time.Now()
	if err := d.c.Write(ctx, websocket.MessageText, payload); err != nil {
		return res, fmt.Errorf("write: %w", err)
	}
	for {
		_, data, err := d.c.Read(ctx)
		if err != nil {
			return res, fmt.Errorf("read: %w", err)
		}
		typ := peer.EventType(data)
		if typ == "response.output_item.added" && res.overhead == 0 {
			res.overhead = time.Since(t0)
		}
		res.events++
		switch {
		case typ == "error":
			return res, fmt.Errorf("server error: %.500s", data)
		case d.isAppend && (typ == "response.done" || peer.IsTerminal(typ)):
			res.total = time.Since(t0)
			return res, d.finishAppend(&res, typ, data)
		case !d.isAppend && peer.IsTerminal(typ):
			res.total = time.Since(t0)
			return res, finishPublic(&res, data, d.engine)
		}
	}
}

func (d *wsDriver) finishAppend(res *turnResult, typ string, data []byte) error {
	if typ != "response.done" {
		if err := finishPublic(res, data, d.engine); err != nil {
			return err
		}
		res.final = true
		if !d.engine { // engine mode: calls the ended rollout left are answered by the next create
			res.calls = nil
		}
		var left []call
		for _, c := range res.calls {
			if !d.seen[c.id] {
				left = append(left, c)
			}
		}
		res.calls = left
	} else {
		res.suspended = true
		var ev endEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("bad response.done %.200s: %w", data, err)
		}
		res.responseID = ev.ResponseID
		if ev.Usage != nil {
			res.usage = *ev.Usage
		}
		calls, _, err := parseOutput(ev.Output)
		if err != nil {
			return err
		}
		pending := make(map[string]bool, len(ev.PendingCallIDs))
		for _, id := range ev.PendingCallIDs {
			pending[id] = true
		}
		res.calls = res.calls[:0]
		for _, c := range calls {
			if pending[c.id] {
				res.calls = append(res.calls, c)
			}
		}
		if len(res.calls) != len(ev.PendingCallIDs) {
			return fmt.Errorf("response.done: pending_call_ids %v do not match its output", ev.PendingCallIDs)
		}
	}
	for _, c := range res.calls {
		d.seen[c.id] = true
	}
	// The append shape reports cumulative usage: the turn's step is the difference.
	total := res.usage
	res.usage = total.minus(d.cum)
	d.cum = total
	return nil
}

// httpDriver drives POST /v1/responses with stream:true (SSE).
type httpDriver struct {
	client *http.Client
	url    string
	apiKey string
	engine bool // engine mode: incomplete turns are turns
}

func (d *httpDriver) close() {}

func (d *httpDriver) turn(ctx context.Context, payload []byte) (turnResult, error) {
	var res turnResult
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(payload))
	if err != nil {
		return res, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if d.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+d.apiKey)
	}
	t0 := time.Now()
	resp, err := d.client.Do(req)
	if err != nil {
		return res, fmt.Errorf("POST: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return res, fmt.Errorf("POST: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && bytes.HasPrefix(line, []byte("data:")) {
			data := bytes.TrimSpace(line[len("data:"):])
			typ := peer.EventType(data)
			if typ == "response.output_item.added" && res.overhead == 0 {
				res.overhead = time.Since(t0)
			}
			res.events++
			switch {
			case typ == "error":
				return res, fmt.Errorf("server error: %.500s", data)
			case peer.IsTerminal(typ):
				res.total = time.Since(t0)
				if err := finishPublic(&res, data, d.engine); err != nil {
					return res, err
				}
				_, _ = io.Copy(io.Discard, br) // end of stream: keep the connection reusable
				return res, nil
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return res, fmt.Errorf("SSE stream ended before the terminal event")
			}
			return res, fmt.Errorf("read SSE: %w", err)
		}
	}
}
