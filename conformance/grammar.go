package conformance

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The shapes.
const (
	shapePublic = "public"
	shapeAppend = "append"
)

// idSet holds every id a scenario has seen, so that the grammar can check ids are unique.
type idSet map[string]bool

// add records id of kind and reports whether it is new.
func (s idSet) add(kind, id string) bool {
	k := kind + " " + id
	if s[k] {
		return false
	}
	s[k] = true
	return true
}

// Grammar checks the server events of one connection (or one SSE stream) as they arrive.
// It is the checker every scenario of the suite
// runs on every frame, exported so that other tests of a server can run it on the frames they
// read ([NewGrammar], [Grammar.Feed], [Grammar.Appended], [Grammar.Done]). It checks:
//
//   - sequence_number is contiguous from 0 per response (public shape) or per rollout, over
//     every event including response.done (append shape); error frames carry none;
//   - response.created comes first and once; response.in_progress, if sent, right after it,
//     and again at any point before the terminal event as a keepalive during a long silence
//     (with status in_progress);
//   - each output item is opened by output_item.added and closed by output_item.done before
//     the next opens; output_index counts 0, 1, 2 … per response (per rollout);
//   - deltas concatenate to the .done text or arguments, and to the item in output_item.done;
//   - response.done (append shape only) carries exactly the items since the previous
//     suspension and their call_ids as pending_call_ids, and a cumulative usage;
//   - the terminal Response's output equals the output_item.done items, its status matches
//     the event, its usage is plausible; exactly one terminal event, and
//     nothing of that response after it;
//   - response, item and call ids are unique;
//   - responses do not interleave: output events belong to the response holding the sampling
//     slot (the last created, or the next appended rollout in FIFO order);
//   - error frames are the error envelope {type, status, error{type, code, message, param}}.
//
// Event types it does not know fail the check. A Grammar is not safe for concurrent use.
type Grammar struct {
	shape   string
	ids     idSet
	resp    map[string]*rstate
	holder  *rstate  // the response whose output events are arriving; nil when none samples
	last    *rstate  // the response that ended last (response.steer.pending follows its terminal event)
	resumes []string // append shape: rollouts with an accepted append waiting for the slot
}

// rstate is the grammar's view of one response (public) or rollout (append).
type rstate struct {
	id        string
	seq       int // next sequence_number
	index     int // next output_index
	open      *openItem
	done      []any // output_item.done items
	since     []any // append: the items since the previous suspension
	stop      []any // the items of the last stop (response.done, or since at the terminal)
	suspended bool
	ended     bool
	usageIn   int // append: the cumulative usage of the last stop
	usageOut  int
}

type openItem struct {
	index int
	id    string
	typ   string
	args  string
	parts map[string]*openPart // "content/0", "summary/0"
	order []string
}

type openPart struct {
	text             string
	textDone, closed bool
}

func newGrammar(shape string, ids idSet) *Grammar {
	return &Grammar{shape: shape, ids: ids, resp: map[string]*rstate{}}
}

// NewGrammar returns a checker for the events of one connection in shape, [ShapePublic]
// (also for one SSE stream of POST /v1/responses) or [ShapeAppend]. It panics on another
// shape, a programming error.
func NewGrammar(shape string) *Grammar {
	if shape != ShapePublic && shape != ShapeAppend {
		panic(fmt.Sprintf("conformance.NewGrammar: shape %q, want %q or %q", shape, ShapePublic, ShapeAppend))
	}
	return newGrammar(shape, idSet{})
}

// Feed checks the next frame the server sent, in arrival order. The error describes the first
// violation, naming the event and the rule; after an error the Grammar's state is undefined.
func (g *Grammar) Feed(f Frame) error {
	if v := g.feed(f); v != "" {
		return errors.New(v)
	}
	return nil
}

// Appended tells the Grammar (append shape) that a response.append to rollout responseID was
// sent and is expected to be accepted: the rollout's output events continue, without any
// lifecycle event, when it holds the sampling slot, after the rollouts appended before it.
// Without it, output events after the rollout's response.done fail the check.
func (g *Grammar) Appended(responseID string) { g.resumed(responseID) }

// Done checks that the stream fed so far ended cleanly: every response reached its terminal
// event or, in the append shape, is suspended at response.done, and every appended rollout
// resumed. It does not change the Grammar; feeding may go on.
func (g *Grammar) Done() error {
	ids := slices.Sorted(maps.Keys(g.resp))
	for _, id := range ids {
		r := g.resp[id]
		if !r.ended && !(g.shape == ShapeAppend && r.suspended) {
			return fmt.Errorf("response %s has no terminal event (sequence_number %d was next)", id, r.seq)
		}
	}
	if len(g.resumes) > 0 {
		return fmt.Errorf("rollout %s was appended to but sent no output", g.resumes[0])
	}
	return nil
}

// resumed tells the grammar that an append to rollout id was sent and is expected to be
// accepted: its output events will follow when it gets the sampling slot.
func (g *Grammar) resumed(id string) { g.resumes = append(g.resumes, id) }

// state is the grammar's state of response id (nil if unknown).
func (g *Grammar) state(id string) *rstate { return g.resp[id] }

var terminalTypes = map[string]string{
	"response.completed":  "completed",
	"response.incomplete": "incomplete",
	"response.failed":     "failed",
}

func isTerminal(typ string) bool { _, ok := terminalTypes[typ]; return ok }

// outputEvents are the events inside a response that carry no response id.
var outputEvents = map[string]bool{
	"response.output_item.added":             true,
	"response.output_item.done":              true,
	"response.content_part.added":            true,
	"response.content_part.done":             true,
	"response.output_text.delta":             true,
	"response.output_text.done":              true,
	"response.output_text.annotation.added":  true,
	"response.refusal.delta":                 true,
	"response.refusal.done":                  true,
	"response.function_call_arguments.delta": true,
	"response.function_call_arguments.done":  true,
	"response.reasoning.delta":               true,
	"response.reasoning.done":                true,
	"response.reasoning_text.delta":          true,
	"response.reasoning_text.done":           true,
	"response.reasoning_summary_part.added":  true,
	"response.reasoning_summary_part.done":   true,
	"response.reasoning_summary_text.delta":  true,
	"response.reasoning_summary_text.done":   true,
}

// feed checks one frame and returns a description of the violation, or "".
func (g *Grammar) feed(f Frame) string {
	typ := f.Type()
	switch {
	case typ == "":
		return "a frame without a type"
	case typ == "error":
		return checkErrorEnvelope(f)
	case strings.HasPrefix(typ, "response.steer."):
		if g.shape == shapeAppend {
			return typ + " on the append shape"
		}
		g.steerSeq(f)
		return ""
	case typ == "response.done" && g.shape != shapeAppend:
		return "response.done is not an event of the public shape (its terminal events are response.completed, response.incomplete and response.failed)"
	}
	var r *rstate
	switch {
	case typ == "response.created":
		id := f.Str("response", "id")
		if id == "" {
			return "response.created without response.id"
		}
		if g.resp[id] != nil {
			return fmt.Sprintf("a second response.created for %s (no lifecycle event may repeat; a resumed rollout sends none)", id)
		}
		if !g.ids.add("response", id) {
			return fmt.Sprintf("response id %s was used before", id)
		}
		if h := g.holder; h != nil {
			return fmt.Sprintf("response.created of %s while %s is still sampling: responses interleave", id, h.id)
		}
		r = &rstate{id: id}
		g.resp[id] = r
		g.holder = r
	case typ == "response.in_progress" || typ == "response.queued" || isTerminal(typ):
		id := f.Str("response", "id")
		if r = g.resp[id]; r == nil {
			return fmt.Sprintf("%s for %q, which has no response.created", typ, id)
		}
	case typ == "response.done":
		id := f.Str("response_id")
		if r = g.resp[id]; r == nil {
			return fmt.Sprintf("response.done for %q, which has no response.created", id)
		}
	case outputEvents[typ]:
		r = g.holder
		if r == nil && g.shape == shapeAppend && len(g.resumes) > 0 {
			id := g.resumes[0]
			g.resumes = g.resumes[1:]
			r = g.resp[id]
			if r == nil || !r.suspended {
				return fmt.Sprintf("%s after an append to %s, which was not suspended", typ, id)
			}
			r.suspended = false
			g.holder = r
		}
		if r == nil {
			return fmt.Sprintf("%s while no response is sampling", typ)
		}
	default:
		return fmt.Sprintf("unknown server event type %q", typ)
	}
	if r.ended {
		return fmt.Sprintf("%s after the terminal event of %s", typ, r.id)
	}
	seq, ok := f.Int("sequence_number")
	if !ok {
		return fmt.Sprintf("%s without an integer sequence_number", typ)
	}
	if seq != r.seq {
		return fmt.Sprintf("%s has sequence_number %d, want %d (contiguous from 0 per %s)", typ, seq, r.seq, g.unit())
	}
	r.seq++
	return g.event(r, typ, f)
}

// steerSeq accounts a response.steer.* event (an open question: its
// sequence_number has no documented base). An event whose sequence_number continues the
// sampling response's sequence (response.steer.accepted), or the sequence of the response that
// ended last (response.steer.pending after its terminal event), takes that place; any other
// (a response.steer.failed sent before a response took the steer) is accepted as it is.
func (g *Grammar) steerSeq(f Frame) {
	seq, ok := f.Int("sequence_number")
	if !ok {
		return
	}
	for _, r := range []*rstate{g.holder, g.last} {
		if r != nil && seq == r.seq {
			r.seq++
			return
		}
	}
}

func (g *Grammar) unit() string {
	if g.shape == shapeAppend {
		return "rollout"
	}
	return "response"
}

// event checks one event of response r.
func (g *Grammar) event(r *rstate, typ string, f Frame) string {
	it := r.open
	inItem := func() string {
		if it == nil {
			return fmt.Sprintf("%s while no output item is open", typ)
		}
		if n, _ := f.Int("output_index"); n != it.index || !f.Has("output_index") {
			return fmt.Sprintf("%s for output_index %v while item %d is open", typ, f.Get("output_index"), it.index)
		}
		if f.Has("item_id") && f.Str("item_id") != it.id {
			return fmt.Sprintf("%s for item_id %q while item %q is open", typ, f.Str("item_id"), it.id)
		}
		return ""
	}
	switch typ {
	case "response.created":
		if len(f.List("response", "output")) != 0 {
			return "response.created with a non-empty output"
		}
	case "response.in_progress":
		if st := f.Str("response", "status"); st != "in_progress" {
			return fmt.Sprintf("response.in_progress with status %q", st)
		}
	case "response.queued":
		if r.index > 0 || it != nil {
			return fmt.Sprintf("%s after output started: lifecycle events come before the output (a resumed rollout sends none)", typ)
		}
	case "response.output_item.added":
		if it != nil {
			return fmt.Sprintf("output_item.added (output_index %v) while item %d is open: it was not closed by output_item.done", f.Get("output_index"), it.index)
		}
		if n, ok := f.Int("output_index"); !ok || n != r.index {
			return fmt.Sprintf("output_item.added with output_index %v, want %d", f.Get("output_index"), r.index)
		}
		item := f.Obj("item")
		id := item.Str("id")
		if id == "" || item.Type() == "" {
			return "output_item.added without item.id or item.type"
		}
		if !g.ids.add("item", id) {
			return fmt.Sprintf("item id %s was used before", id)
		}
		if item.Type() == "function_call" {
			if item.Str("call_id") == "" || item.Str("name") == "" {
				return "function_call item without call_id or name"
			}
			if !g.ids.add("call", item.Str("call_id")) {
				return fmt.Sprintf("call_id %s was used before", item.Str("call_id"))
			}
		}
		r.open = &openItem{index: r.index, id: id, typ: item.Type(), args: item.Str("arguments"), parts: map[string]*openPart{}}
	case "response.content_part.added", "response.reasoning_summary_part.added":
		if v := inItem(); v != "" {
			return v
		}
		kind, n := partKey(typ, f)
		if want := it.count(kind); n != want {
			return fmt.Sprintf("%s with index %d, want %d", typ, n, want)
		}
		key := fmt.Sprintf("%s/%d", kind, n)
		it.parts[key] = &openPart{text: f.Str("part", "text")}
		it.order = append(it.order, key)
	case "response.output_text.delta", "response.refusal.delta", "response.reasoning.delta",
		"response.reasoning_text.delta", "response.reasoning_summary_text.delta":
		if v := inItem(); v != "" {
			return v
		}
		p, v := it.part(typ, f)
		if v != "" {
			return v
		}
		if p.textDone {
			return fmt.Sprintf("%s after the part's text was done", typ)
		}
		p.text += f.Str("delta")
	case "response.output_text.done", "response.refusal.done", "response.reasoning.done",
		"response.reasoning_text.done", "response.reasoning_summary_text.done":
		if v := inItem(); v != "" {
			return v
		}
		p, v := it.part(typ, f)
		if v != "" {
			return v
		}
		field := "text"
		if typ == "response.refusal.done" {
			field = "refusal"
		}
		if got := f.Str(field); got != p.text {
			return fmt.Sprintf("%s %s %q differs from its deltas concatenated %q", typ, field, clip(got, 200), clip(p.text, 200))
		}
		p.textDone = true
	case "response.content_part.done", "response.reasoning_summary_part.done":
		if v := inItem(); v != "" {
			return v
		}
		p, v := it.part(typ, f)
		if v != "" {
			return v
		}
		if got := f.Obj("part"); got.Has("text") && got.Str("text") != p.text {
			return fmt.Sprintf("%s part.text %q differs from its deltas %q", typ, clip(got.Str("text"), 200), clip(p.text, 200))
		}
		p.closed = true
	case "response.output_text.annotation.added":
		if v := inItem(); v != "" {
			return v
		}
	case "response.function_call_arguments.delta":
		if v := inItem(); v != "" {
			return v
		}
		it.args += f.Str("delta")
	case "response.function_call_arguments.done":
		if v := inItem(); v != "" {
			return v
		}
		if got := f.Str("arguments"); got != it.args {
			return fmt.Sprintf("function_call_arguments.done arguments %q differ from the deltas concatenated %q", clip(got, 200), clip(it.args, 200))
		}
	case "response.output_item.done":
		if it == nil {
			return fmt.Sprintf("output_item.done (output_index %v) without output_item.added", f.Get("output_index"))
		}
		if v := inItem(); v != "" {
			return v
		}
		item := f.Obj("item")
		if item.Str("id") != it.id || item.Type() != it.typ {
			return fmt.Sprintf("output_item.done for item %s (%s), but %s (%s) is open", item.Str("id"), item.Type(), it.id, it.typ)
		}
		if v := it.check(item); v != "" {
			return v
		}
		r.done = append(r.done, f.Get("item"))
		r.since = append(r.since, f.Get("item"))
		r.open = nil
		r.index++
	case "response.done":
		if it != nil {
			return fmt.Sprintf("response.done while item %d is open", it.index)
		}
		if !sameJSON(f.List("output"), r.since) {
			return fmt.Sprintf("response.done output %s differs from the items since the previous suspension %s",
				clip(compact(f.List("output")), 300), clip(compact(r.since), 300))
		}
		var calls []any
		for _, item := range items(r.since) {
			if item.Type() == "function_call" {
				calls = append(calls, item.Str("call_id"))
			}
		}
		if len(calls) == 0 {
			return "response.done without a pending call (a rollout suspends only at tool calls)"
		}
		if !sameJSON(f.List("pending_call_ids"), calls) {
			return fmt.Sprintf("response.done pending_call_ids %s, want the call_ids since the previous suspension %s",
				compact(f.Get("pending_call_ids")), compact(calls))
		}
		if v := g.usage(r, f.Obj("usage")); v != "" {
			return "response.done: " + v
		}
		r.stop, r.since = r.since, nil
		r.suspended = true
		if g.holder == r {
			g.holder = nil
		}
	default: // terminal
		if it != nil {
			return fmt.Sprintf("%s while item %d is open (it needs an output_item.done first)", typ, it.index)
		}
		resp := f.Obj("response")
		if want := terminalTypes[typ]; resp.Str("status") != want {
			return fmt.Sprintf("%s with response.status %q, want %q", typ, resp.Str("status"), want)
		}
		if !sameJSON(resp.List("output"), r.done) {
			return fmt.Sprintf("the terminal Response's output %s differs from the output_item.done items %s",
				clip(compact(resp.Get("output")), 400), clip(compact(r.done), 400))
		}
		switch typ {
		case "response.failed":
			if resp.Str("error", "code") == "" || resp.Str("error", "message") == "" {
				return "response.failed without response.error {code, message}"
			}
		case "response.incomplete":
			if resp.Str("incomplete_details", "reason") == "" {
				return "response.incomplete without incomplete_details.reason"
			}
		}
		if u := resp.Obj("usage"); u != nil || typ != "response.failed" {
			if v := g.usage(r, u); v != "" {
				return typ + ": " + v
			}
		}
		r.stop, r.since = r.since, nil
		r.ended = true
		g.last = r
		if g.holder == r {
			g.holder = nil
		}
		g.resumes = slices.DeleteFunc(g.resumes, func(id string) bool { return id == r.id })
	}
	return ""
}

// usage checks the usage of a stop: present, total = input + output, cached
// at most input; in the append shape cumulative over the rollout, so never decreasing.
func (g *Grammar) usage(r *rstate, u Frame) string {
	if u == nil {
		return "no usage"
	}
	in, ok1 := u.Int("input_tokens")
	out, ok2 := u.Int("output_tokens")
	total, ok3 := u.Int("total_tokens")
	cached := u.Num("input_tokens_details", "cached_tokens")
	if !ok1 || !ok2 || !ok3 || in < 0 || out < 0 || total != in+out || cached > in {
		return fmt.Sprintf("implausible usage %s (want total_tokens = input_tokens + output_tokens, cached_tokens <= input_tokens)", compact(u))
	}
	if g.shape == shapeAppend {
		if in < r.usageIn || out < r.usageOut {
			return fmt.Sprintf("usage %s is below the previous stop's (%d in, %d out): a rollout's usage is cumulative", compact(u), r.usageIn, r.usageOut)
		}
		r.usageIn, r.usageOut = in, out
	}
	return ""
}

// partKey is the key of the part an event names, and its index.
func partKey(typ string, f Frame) (string, int) {
	if strings.Contains(typ, "summary") {
		return "summary", f.Num("summary_index")
	}
	return "content", f.Num("content_index")
}

// count is the number of parts of kind added so far.
func (it *openItem) count(kind string) int {
	n := 0
	for _, k := range it.order {
		if strings.HasPrefix(k, kind+"/") {
			n++
		}
	}
	return n
}

func (it *openItem) part(typ string, f Frame) (*openPart, string) {
	kind, n := partKey(typ, f)
	p := it.parts[fmt.Sprintf("%s/%d", kind, n)]
	if p == nil {
		return nil, fmt.Sprintf("%s for %s part %d, which was not added", typ, kind, n)
	}
	if p.closed {
		return nil, fmt.Sprintf("%s for %s part %d, which is already done", typ, kind, n)
	}
	return p, ""
}

// check compares the item of output_item.done with what its events streamed.
func (it *openItem) check(item Frame) string {
	for _, k := range it.order {
		if !it.parts[k].closed {
			return fmt.Sprintf("output_item.done while %s is open", k)
		}
	}
	switch it.typ {
	case "function_call":
		if item.Str("arguments") != it.args {
			return fmt.Sprintf("output_item.done arguments %q differ from the streamed arguments %q", clip(item.Str("arguments"), 200), clip(it.args, 200))
		}
	case "message":
		content := items(item.List("content"))
		n := 0
		for _, k := range it.order {
			if !strings.HasPrefix(k, "content/") {
				continue
			}
			if n >= len(content) {
				return fmt.Sprintf("output_item.done has %d content parts, %d were streamed", len(content), it.count("content"))
			}
			text := content[n].Str("text")
			if content[n].Type() == "refusal" {
				text = content[n].Str("refusal")
			}
			if text != it.parts[k].text {
				return fmt.Sprintf("output_item.done content[%d] %q differs from the streamed text %q", n, clip(text, 200), clip(it.parts[k].text, 200))
			}
			n++
		}
		if n != len(content) {
			return fmt.Sprintf("output_item.done has %d content parts, %d were streamed", len(content), n)
		}
	}
	return ""
}

// checkErrorEnvelope checks an error frame: {"type":"error","status":N,"error":{"type","code",
// "message","param"}}, code a string, param a string or null, no sequence_number (error
// frames are not part of any response's stream).
func checkErrorEnvelope(f Frame) string {
	if f.Has("sequence_number") {
		return "an error frame carries a sequence_number (error frames are not part of a response's stream)"
	}
	if _, ok := f.Int("status"); !ok {
		return "an error frame without an integer status"
	}
	e := f.Obj("error")
	if e == nil {
		return "an error frame without an error object"
	}
	for _, k := range []string{"type", "code", "message"} {
		if s, ok := e.Get(k).(string); !ok || s == "" {
			return fmt.Sprintf("error.%s is not a non-empty string", k)
		}
	}
	if !e.Has("param") {
		return "error.param is missing (a string or null)"
	}
	if p := e.Get("param"); p != nil {
		if _, ok := p.(string); !ok {
			return "error.param is neither a string nor null"
		}
	}
	return ""
}
