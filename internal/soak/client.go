package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/tetherd/tether/internal/peer"
	"github.com/tetherd/tether/internal/wsguard"
)

// appendBeta opts a WebSocket into the append shape (docs/append-protocol.md, Opting in).
const appendBeta = "responses_append=v1"

// shape is a connection's protocol shape.
type shape int

const (
	appendShape shape = iota
	publicShape
)

func (s shape) String() string {
	if s == appendShape {
		return "append"
	}
	return "public"
}

// frameTimeout bounds the wait for one server frame: a server that stops sending while a
// rollout runs is a violation, not a hang.
const frameTimeout = 60 * time.Second

// conn is one client WebSocket: raw JSON frames, one goroutine (the worker's) reading and
// writing.
type conn struct {
	// ctx is the connection's own child of the run's context: the per-frame timeouts derive
	// from it, not from the context every worker shares (whose mutex would be contended by
	// thousands of reads a second).
	ctx    context.Context
	cancel context.CancelFunc
	c      *websocket.Conn
	shape  shape
	expect []expectation // error frames owed by the server, in the order of the frames sent
	frames int64         // frames received
	bytes  int64         // payload bytes received
	trail  [trailLen]string
	trailN int
	opened time.Time
	mux    *mux        // with Config.Lanes: the shared socket (c is its WebSocket); nil: c is this conn's own
	in     chan []byte // with mux: this lane's frames
}

// trailLen is how many recent frames (deltas left out) a connection remembers for the
// violation report.
const trailLen = 14

// note remembers a frame sent (dir "→") or received ("←"), with the time since the
// connection opened.
func (c *conn) note(dir string, data []byte) {
	s := string(data)
	if len(s) > 260 {
		s = s[:200] + " … " + s[len(s)-50:]
	}
	c.trail[c.trailN%trailLen] = fmt.Sprintf("%7.3fs %s %s", time.Since(c.opened).Seconds(), dir, s)
	c.trailN++
}

// recent returns the remembered frames, oldest first.
func (c *conn) recent() []string {
	var out []string
	for i := max(0, c.trailN-trailLen); i < c.trailN; i++ {
		out = append(out, c.trail[i%trailLen])
	}
	return out
}

// expectation is an error frame the server owes the client for a frame it sent. An optional
// one (a cancel that may or may not race with the rollout's end) is skipped when another
// error arrives.
type expectation struct {
	code     string
	what     string
	optional bool
}

// upgradeError is an upgrade answered with an HTTP error (e.g. 503 too_many_connections).
type upgradeError struct {
	status int
	code   string
}

func (e *upgradeError) Error() string {
	return fmt.Sprintf("upgrade refused: HTTP %d %s", e.status, e.code)
}

// dial opens a connection of shape sh.
func (t *target) dial(parent context.Context, sh shape) (*conn, error) {
	ctx := parent
	h := http.Header{}
	if sh == appendShape {
		h.Set("OpenAI-Beta", appendBeta)
	}
	if t.apiKey != "" {
		h.Set("Authorization", "Bearer "+t.apiKey)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	// wsguard: a frame cut off by the server's drop (a stalled reader's write timeout) is a
	// read error, not an empty or truncated message.
	c, resp, err := websocket.Dial(ctx, t.wsURL, &websocket.DialOptions{HTTPHeader: h, HTTPClient: wsguard.Client(t.client),
		CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			ue := &upgradeError{status: resp.StatusCode, code: "http_" + strconv.Itoa(resp.StatusCode)}
			if resp.Body != nil {
				body, _ := io.ReadAll(resp.Body)
				var e struct {
					Error struct {
						Code string `json:"code"`
					} `json:"error"`
				}
				if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
					ue.code = e.Error.Code
				}
			}
			return nil, ue
		}
		return nil, err
	}
	c.SetReadLimit(-1)
	if sh == appendShape && resp.Header.Get("OpenAI-Beta") != appendBeta {
		_ = c.CloseNow()
		return nil, fmt.Errorf("the server did not confirm OpenAI-Beta: %s on the upgrade", appendBeta)
	}
	cctx, ccancel := context.WithCancel(parent)
	return &conn{ctx: cctx, cancel: ccancel, c: c, shape: sh, opened: time.Now()}, nil
}

// send writes one text frame. ctx is the caller's context, the connection's parent: the
// write's own context derives from the connection's.
func (c *conn) send(_ context.Context, data []byte) error {
	ctx, cancel := context.WithTimeout(c.ctx, frameTimeout)
	defer cancel()
	c.note("→", data)
	return c.c.Write(ctx, websocket.MessageText, data)
}

func (c *conn) sendJSON(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.send(ctx, b)
}

func (c *conn) sendBinary(_ context.Context, data []byte) error {
	ctx, cancel := context.WithTimeout(c.ctx, frameTimeout)
	defer cancel()
	c.note("→ (binary)", data)
	return c.c.Write(ctx, websocket.MessageBinary, data)
}

// frame is one server frame.
type frame struct {
	data []byte
	typ  string
	seq  int // sequence_number, -1 when absent
}

func (c *conn) read(_ context.Context) (frame, error) {
	var typ websocket.MessageType
	var data []byte
	var err error
	if c.mux != nil {
		typ, data, err = c.readLane()
	} else {
		ctx, cancel := context.WithTimeout(c.ctx, frameTimeout)
		typ, data, err = c.c.Read(ctx)
		cancel()
	}
	if err != nil {
		return frame{}, err
	}
	c.frames++
	c.bytes += int64(len(data))
	if typ != websocket.MessageText {
		return frame{data: data, typ: "<binary>", seq: -1}, nil
	}
	f := frame{data: data, typ: peer.EventType(data), seq: sequenceNumber(data)}
	if !strings.HasSuffix(f.typ, ".delta") {
		c.note("←", data)
	}
	return f, nil
}

// close drops the connection: abruptly (no close handshake) or with a normal close.
func (c *conn) close(graceful bool) {
	defer c.cancel()
	if c.mux != nil {
		c.mux.close(graceful)
		return
	}
	if graceful {
		_ = c.c.Close(websocket.StatusNormalClosure, "soak")
		return
	}
	_ = c.c.CloseNow()
}

// sequenceNumber finds the top-level "sequence_number" without decoding the frame; Tether
// writes it right after "type". -1 if absent.
func sequenceNumber(data []byte) int {
	const key = `"sequence_number":`
	i := bytes.Index(data, []byte(key))
	if i < 0 || i > 80 {
		return -1
	}
	n, ok := 0, false
	for _, b := range data[i+len(key):] {
		if b < '0' || b > '9' {
			break
		}
		n, ok = n*10+int(b-'0'), true
	}
	if !ok {
		return -1
	}
	return n
}

// streamID finds the top-level "stream_id" (a lane's name) without decoding the frame; "" if
// absent. A key inside a JSON string is escaped (\"stream_id\"), so only a member matches; the
// Response object and items have no such member.
func streamID(data []byte) string {
	const key = `"stream_id":"`
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return ""
	}
	rest := data[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// event is the part of a server event the soak checks.
type event struct {
	Type           string            `json:"type"`
	OutputIndex    *int              `json:"output_index"`
	ItemID         string            `json:"item_id"`
	Item           json.RawMessage   `json:"item"`
	ResponseID     string            `json:"response_id"`
	PendingCallIDs []string          `json:"pending_call_ids"`
	Output         []json.RawMessage `json:"output"`
	Usage          *usage            `json:"usage"`
	Response       *response         `json:"response"`
	Status         int               `json:"status"`
	Error          *apiError         `json:"error"`
}

type response struct {
	ID                 string            `json:"id"`
	Status             string            `json:"status"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Output             []json.RawMessage `json:"output"`
	Usage              *usage            `json:"usage"`
	IncompleteDetails  *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *apiError `json:"error"`
}

type apiError struct {
	Type    string  `json:"type"`
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
}

type usage struct {
	Input   int `json:"input_tokens"`
	Details struct {
		Cached int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	Output int `json:"output_tokens"`
	Total  int `json:"total_tokens"`
}

// item is an output item.
type item struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

func (it *item) text() string {
	var s string
	for _, c := range it.Content {
		s += c.Text
	}
	return s
}

func decodeEvent(f frame) (*event, error) {
	var ev event
	if err := json.Unmarshal(f.data, &ev); err != nil {
		return nil, fmt.Errorf("undecodable %s frame %.200q: %w", f.typ, f.data, err)
	}
	return &ev, nil
}
