package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// drillKind is a drill client's shape and store setting.
type drillKind int

const (
	kindAppend      drillKind = iota // append shape, store:true
	kindPublic                       // public shape over WebSocket, store:true
	kindPublicNoStr                  // public shape, store:false (hot path only)
)

func (k drillKind) String() string { return [...]string{"append", "public", "public-nostore"}[k] }

// drillCounts are the drill's outcome counters.
type drillCounts struct {
	rollouts, completed, segments, terminalSeen, resumedStored, restartedFresh atomic.Int64
	notFoundRecovered, refused, dials, dialFailures, toolOutputs               atomic.Int64
	lost, duplicated                                                           atomic.Int64
	mu                                                                         sync.Mutex
	violations                                                                 []string
}

func (c *drillCounts) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.violations) < 50 {
		c.violations = append(c.violations, fmt.Sprintf(format, args...))
	}
}

// drillItem is the part of an output item the drill reads.
type drillItem struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
	Content   []struct {
		Text string `json:"text"`
	} `json:"content"`
}

type drillEvent struct {
	Type           string   `json:"type"`
	ResponseID     string   `json:"response_id"`
	PendingCallIDs []string `json:"pending_call_ids"`
	Response       *struct {
		ID                string      `json:"id"`
		Status            string      `json:"status"`
		Output            []drillItem `json:"output"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
	} `json:"response"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// checkpoint is where a rollout resumes: the last response the client knows is stored (or,
// for store:false, its whole transcript), the quote lines its chain holds, and its
// unanswered calls.
type checkpoint struct {
	prev       string
	want       []string // quote lines (sim format) of the user texts and tool outputs in the chain
	calls      []drillItem
	transcript []any // store:false: every input and output item so far, for a full-input resend
}

// drillClient runs rollouts of one kind through nginx until stop is closed.
type drillClient struct {
	id    int
	kind  drillKind
	url   string
	turns int
	n     *drillCounts
	c     *websocket.Conn
}

func (d *drillClient) dial(ctx context.Context, appendShape bool) bool {
	for backoff := 20 * time.Millisecond; ctx.Err() == nil; backoff = min(2*backoff, time.Second) {
		d.n.dials.Add(1)
		h := http.Header{}
		if appendShape {
			h.Set("OpenAI-Beta", "responses_append=v1")
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, _, err := websocket.Dial(dctx, d.url, &websocket.DialOptions{HTTPHeader: h})
		cancel()
		if err == nil {
			c.SetReadLimit(-1)
			d.c = c
			return true
		}
		d.n.dialFailures.Add(1)
		time.Sleep(backoff)
	}
	return false
}

func (d *drillClient) drop() {
	if d.c != nil {
		_ = d.c.CloseNow()
		d.c = nil
	}
}

func (d *drillClient) send(ctx context.Context, v any) error {
	b, _ := json.Marshal(v)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return d.c.Write(wctx, websocket.MessageText, b)
}

func (d *drillClient) read(ctx context.Context) (*drillEvent, error) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, b, err := d.c.Read(rctx)
	if err != nil {
		return nil, err
	}
	var ev drillEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		return nil, fmt.Errorf("undecodable frame %.200s", b)
	}
	return &ev, nil
}

// quote is the sim's answer line for a text (see sampler/sim: Go-quoted, cut to 64 characters).
func quote(role, s string) string {
	cut, n := s, 0
	for i := range s {
		if n == 64 {
			cut = s[:i] + "…"
			break
		}
		n++
	}
	return role + ": " + strconv.Quote(cut)
}

func (d *drillClient) output(tag, callID string) string {
	return fmt.Sprintf("[%s] %s", tag, callID[max(0, len(callID)-16):])
}

// run loops rollouts until stop is closed; ctx is the hard deadline.
func (d *drillClient) run(ctx context.Context, stop <-chan struct{}) {
	defer d.drop()
	for r := 1; ; r++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		d.n.rollouts.Add(1)
		d.rollout(ctx, fmt.Sprintf("%s-c%d-r%d", d.kind.String()[:1], d.id, r))
	}
}

// rollout runs one rollout to its answer, resuming after every interruption.
func (d *drillClient) rollout(ctx context.Context, tag string) {
	user := fmt.Sprintf("[%s] drill: run %d checks", tag, d.turns)
	cp := checkpoint{want: []string{quote("user", user)},
		transcript: []any{map[string]any{"role": "user", "content": user}}}
	var lastErr error
	defer func() {
		if ctx.Err() != nil {
			d.n.fail("%s: unfinished at the deadline (checkpoint %q, last error %v)", tag, cp.prev, lastErr)
		}
	}()
	usePrev := false // store:false: the next create names the hot-path parent although the connection is new
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if attempt > 50 || ctx.Err() != nil {
			d.n.fail("%s: no answer after %d attempts (last checkpoint %s)", tag, attempt, cp.prev)
			return
		}
		if d.c == nil {
			// an append rollout ended by a drain continues on the public shape
			if !d.dial(ctx, d.kind == kindAppend && cp.prev == "") {
				return
			}
		}
		var done bool
		var err error
		if d.kind == kindAppend && cp.prev == "" {
			done, err = d.appendRun(ctx, tag, user, &cp)
		} else {
			done, usePrev, err = d.publicStep(ctx, tag, user, &cp, usePrev)
		}
		if done {
			d.n.completed.Add(1)
			d.drop() // a new connection per rollout: no connection piles up finished chains
			return
		}
		if err != nil {
			lastErr = err
		}
		if err != nil { // the connection dropped before a terminal event (SIGKILL) or was refused
			d.drop()
			if d.kind == kindPublicNoStr {
				usePrev = cp.prev != ""
			} else if cp.prev != "" {
				d.n.resumedStored.Add(1)
			} else {
				d.n.restartedFresh.Add(1)
			}
		}
	}
}

// body is a response.create.
func (d *drillClient) body(prev string, input any, calls int) map[string]any {
	m := map[string]any{"type": "response.create", "model": "sim", "input": input, "tools": []any{shell},
		"store": d.kind != kindPublicNoStr, "metadata": map[string]string{"sim.calls": strconv.Itoa(calls)}}
	if prev != "" {
		m["previous_response_id"] = prev
	}
	return m
}

// outputs answers cp.calls, adding their quotes to want and transcript.
func (d *drillClient) outputs(tag string, calls []drillItem, want *[]string, tr *[]any) []any {
	var in []any
	for _, c := range calls {
		out := d.output(tag, c.CallID)
		in = append(in, map[string]any{"type": "function_call_output", "call_id": c.CallID, "output": out})
		*want = append(*want, quote("tool", out))
		d.n.toolOutputs.Add(1)
	}
	*tr = append(*tr, in...)
	return in
}

// publicStep sends one public-shape create (a continuation of cp) and reads it to its
// terminal event. done: the rollout answered and was verified.
func (d *drillClient) publicStep(ctx context.Context, tag, user string, cp *checkpoint, usePrev bool) (done, nextUsePrev bool, err error) {
	want := append([]string(nil), cp.want...)
	tr := append([]any(nil), cp.transcript...)
	var input any = user
	prev := cp.prev
	calls := d.turns
	switch {
	case prev == "":
	case len(cp.calls) == 0: // drained after every call was answered: a new user turn resumes it
		msg := fmt.Sprintf("[%s] resume after %s", tag, prev)
		input = []any{map[string]any{"role": "user", "content": msg}}
		want = append(want, quote("user", msg))
		calls = 1
	default:
		input = d.outputs(tag, cp.calls, &want, &tr)
	}
	if d.kind == kindPublicNoStr && prev != "" && !usePrev {
		// the hot path lost: send everything
		input, prev = tr, ""
	}
	if err := d.send(ctx, d.body(prev, input, calls)); err != nil {
		return false, usePrev, err
	}
	for {
		ev, err := d.read(ctx)
		if err != nil {
			return false, usePrev, err
		}
		switch {
		case ev.Type == "error":
			code := ""
			if ev.Error != nil {
				code = ev.Error.Code
			}
			switch {
			case code == "previous_response_not_found" && d.kind == kindPublicNoStr:
				d.n.notFoundRecovered.Add(1)
				return false, false, nil // resend with the full input
			case code == "server_shutting_down":
				d.n.refused.Add(1)
				return false, usePrev, errors.New(code)
			}
			d.n.fail("%s: error %+v", tag, ev.Error)
			return false, usePrev, errors.New(code)
		case ev.Type == "response.completed" || ev.Type == "response.incomplete" || ev.Type == "response.failed":
			return d.segmentEnd(tag, cp, ev, want, tr), false, nil
		}
	}
}

// segmentEnd handles a public segment's terminal event.
func (d *drillClient) segmentEnd(tag string, cp *checkpoint, ev *drillEvent, want []string, tr []any) bool {
	d.n.segments.Add(1)
	resp := ev.Response
	if ev.Type != "response.completed" {
		// a drain ended it with its terminal event: resume from the last completed checkpoint
		d.n.terminalSeen.Add(1)
		if resp.IncompleteDetails == nil || resp.IncompleteDetails.Reason != "server_shutdown" {
			d.n.fail("%s: segment ended %s %+v", tag, ev.Type, resp.IncompleteDetails)
		}
		return false
	}
	var calls []drillItem
	for _, it := range resp.Output {
		switch it.Type {
		case "function_call":
			calls = append(calls, it)
			tr = append(tr, map[string]any{"type": "function_call", "call_id": it.CallID, "name": it.Name, "arguments": it.Arguments})
		case "message":
			d.verify(tag, it, want)
			return true
		}
	}
	*cp = checkpoint{prev: resp.ID, want: want, calls: calls, transcript: tr}
	return false
}

// verify checks the sim's answer: it quotes every user text and tool output of the chain
// exactly once, in order, and nothing else.
func (d *drillClient) verify(tag string, msg drillItem, want []string) {
	var text string
	for _, c := range msg.Content {
		text += c.Text
	}
	var got []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, `user: "`) || strings.HasPrefix(line, `tool: "`) {
			got = append(got, line)
		}
	}
	if reflect.DeepEqual(got, want) {
		return
	}
	seen, wanted := map[string]int{}, map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	for _, w := range want {
		wanted[w]++
	}
	for w, n := range wanted {
		if seen[w] < n {
			d.n.lost.Add(int64(n - seen[w]))
		}
	}
	for g, n := range seen {
		if n > wanted[g] {
			d.n.duplicated.Add(int64(n - wanted[g]))
		}
	}
	d.n.fail("%s: answer quotes %q, want %q", tag, got, want)
}

// appendRun runs an append-shape rollout from its create. When a drain ends it with a
// terminal event, cp becomes that stored response and its unanswered calls.
func (d *drillClient) appendRun(ctx context.Context, tag, user string, cp *checkpoint) (bool, error) {
	want := append([]string(nil), cp.want...)
	var tr []any
	answered := map[string]bool{}
	var last []drillItem // the calls of the last append, until it is answered or refused
	if err := d.send(ctx, d.body("", user, d.turns)); err != nil {
		return false, err
	}
	id := ""
	for {
		ev, err := d.read(ctx)
		if err != nil {
			return false, err
		}
		switch ev.Type {
		case "response.created":
			id = ev.Response.ID
		case "response.done":
			var calls []drillItem
			for _, c := range ev.PendingCallIDs {
				calls = append(calls, drillItem{CallID: c})
				answered[c] = true
			}
			last = calls
			in := d.outputs(tag, calls, &want, &tr)
			if err := d.send(ctx, map[string]any{"type": "response.append", "response_id": id, "input": in}); err != nil {
				return false, err
			}
		case "error":
			code := ""
			if ev.Error != nil {
				code = ev.Error.Code
			}
			if code == "server_shutting_down" || code == "response_not_found" || code == "response_not_suspended" {
				// the last append met the drain and was refused: its calls stay open
				d.n.refused.Add(1)
				for _, c := range last {
					answered[c.CallID] = false
				}
				want = want[:len(want)-len(last)]
				last = nil
				continue
			}
			d.n.fail("%s: error %+v", tag, ev.Error)
			return false, errors.New(code)
		case "response.completed", "response.incomplete", "response.failed":
			d.n.segments.Add(1)
			resp := ev.Response
			if ev.Type == "response.completed" {
				for _, it := range resp.Output {
					if it.Type == "message" {
						d.verify(tag, it, want)
						return true, nil
					}
				}
				d.n.fail("%s: completed without an answer", tag)
				return true, nil
			}
			d.n.terminalSeen.Add(1)
			if resp.IncompleteDetails == nil || resp.IncompleteDetails.Reason != "server_shutdown" {
				d.n.fail("%s: append rollout ended %s %+v", tag, ev.Type, resp.IncompleteDetails)
				return true, nil
			}
			stored, err := d.storedOutputs(ctx, resp.ID)
			if err != nil {
				d.n.fail("%s: input_items of %s: %v", tag, resp.ID, err)
				return true, nil
			}
			for _, c := range last { // the last append raced with the drain: Redis says whether it got in
				if !stored[c.CallID] {
					answered[c.CallID] = false
					want = want[:len(want)-1]
				}
			}
			for c := range answered {
				if answered[c] && !stored[c] {
					d.n.lost.Add(1)
					d.n.fail("%s: appended output for %s is not in the stored response %s", tag, c, resp.ID)
				}
			}
			var open []drillItem
			for _, it := range resp.Output {
				if it.Type == "function_call" && !answered[it.CallID] {
					open = append(open, it)
				}
			}
			// the appended outputs the client sent are in want; the stored chain must hold them
			*cp = checkpoint{prev: resp.ID, want: want, calls: open}
			d.drop()
			return false, nil
		}
	}
}

// storedOutputs returns the call_ids of the function_call_outputs that the stored response id
// holds as input items (GET /v1/responses/{id}/input_items through nginx, from Redis).
func (d *drillClient) storedOutputs(ctx context.Context, id string) (map[string]bool, error) {
	u := "http" + strings.TrimPrefix(d.url, "ws") + "/" + id + "/input_items?limit=100"
	for attempt := 0; ; attempt++ {
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil && resp.StatusCode == 200 {
			var list struct {
				Data []drillItem `json:"data"`
			}
			err = json.NewDecoder(resp.Body).Decode(&list)
			resp.Body.Close()
			if err != nil {
				return nil, err
			}
			out := map[string]bool{}
			for _, it := range list.Data {
				if it.Type == "function_call_output" {
					out[it.CallID] = true
				}
			}
			return out, nil
		}
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		// nginx answers 502 while it holds every instance out of rotation, each for
		// fail_timeout (5s) after one failure (a stopped instance's refused connects, a killed
		// one's cut requests): during the restarts all three can be out at once, up to 5s.
		if attempt == 40 {
			return nil, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
