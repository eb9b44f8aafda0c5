package sim

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/protocol"
	. "github.com/tetherd/tether/sampler"
)

func TestMain(m *testing.M) {
	countEncodes = true
	codec() // load the vocabulary outside any synctest bubble
	appendEncoded(nil, "warm up")
	goleak.VerifyTestMain(m)
}

// recorder is a Sink that records everything, copying the reused events.
type recorder struct {
	mu          sync.Mutex
	started     int
	events      []protocol.Event
	suspensions []Suspension
	ending      *Ending
	failAfter   int // Event fails after this many events when > 0
	suspended   chan Suspension
	ended       chan Ending
}

func newRecorder() *recorder {
	return &recorder{suspended: make(chan Suspension, 64), ended: make(chan Ending, 1)}
}

func (r *recorder) Started() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) > 0 || r.ending != nil {
		panic("Started after events")
	}
	r.started++
}

var errGone = errors.New("consumer gone")

func (r *recorder) Event(ev *protocol.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started != 1 {
		panic("Event before Started")
	}
	if r.failAfter > 0 && len(r.events) >= r.failAfter {
		return errGone
	}
	c := *ev
	if ev.Item != nil {
		it := *ev.Item
		it.Content = append([]protocol.ContentPart(nil), it.Content...)
		c.Item = &it
	}
	if ev.Part != nil {
		p := *ev.Part
		c.Part = &p
	}
	r.events = append(r.events, c)
	return nil
}

func (r *recorder) Suspended(s Suspension) {
	r.mu.Lock()
	r.suspensions = append(r.suspensions, s)
	r.mu.Unlock()
	r.suspended <- s
}

func (r *recorder) Ended(e Ending) {
	r.mu.Lock()
	if r.ending != nil {
		panic("Ended twice")
	}
	r.ending = &e
	r.mu.Unlock()
	r.ended <- e
}

func (r *recorder) Events() []protocol.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]protocol.Event(nil), r.events...)
}

// next waits for the rollout's next suspension or ending.
func (r *recorder) next(t *testing.T) (*Suspension, *Ending) {
	t.Helper()
	select {
	case s := <-r.suspended:
		return &s, nil
	case e := <-r.ended:
		return nil, &e
	case <-time.After(10 * time.Second):
		t.Fatal("rollout neither suspended nor ended")
	}
	return nil, nil
}

func (r *recorder) mustSuspend(t *testing.T) Suspension {
	t.Helper()
	s, e := r.next(t)
	if s == nil {
		t.Fatalf("rollout ended (%s %s %v %v) instead of suspending", e.Status, e.Reason, e.Error, e.Err)
	}
	return *s
}

func (r *recorder) mustEnd(t *testing.T) Ending {
	t.Helper()
	s, e := r.next(t)
	if e == nil {
		t.Fatalf("rollout suspended (pending %v) instead of ending", s.PendingCallIDs)
	}
	return *e
}

// fakeTicket records its use.
type fakeTicket struct {
	mu       sync.Mutex
	waits    int
	releases int
	gate     chan struct{} // Wait blocks until closed, when not nil
}

func (t *fakeTicket) Wait(ctx context.Context) error {
	t.mu.Lock()
	t.waits++
	gate := t.gate
	t.mu.Unlock()
	if gate == nil {
		return ctx.Err()
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *fakeTicket) Release() {
	t.mu.Lock()
	t.releases++
	t.mu.Unlock()
}

func (t *fakeTicket) counts() (int, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.waits, t.releases
}

func userMsg(text string) protocol.Item {
	return protocol.Item{Type: protocol.ItemMessage, Role: protocol.RoleUser,
		Content: []protocol.ContentPart{{Type: protocol.PartInputText, Text: text}}}
}

func toolOutput(callID, out string) protocol.Item {
	return protocol.Item{Type: protocol.ItemFunctionCallOutput, CallID: callID, Output: out}
}

func fnTool(name, params string) protocol.Tool {
	t := protocol.Tool{Type: protocol.ToolFunction, Name: name}
	if params != "" {
		t.Parameters = []byte(params)
	}
	return t
}

var weatherTool = fnTool("get_weather", `{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","enum":["c","f"]}},"required":["location"]}`)
var timeTool = fnTool("get_time", `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)
var execTool = fnTool("exec_command", `{"type":"object","properties":{"cmd":{"type":"string"},"workdir":{"type":"string"}},"required":["cmd"]}`)

// outputs answers every pending call of s with "out-<call index>".
func outputs(s Suspension, prefix string) []protocol.Item {
	var in []protocol.Item
	for i, id := range s.PendingCallIDs {
		in = append(in, toolOutput(id, prefix+"-"+string(rune('a'+i))))
	}
	return in
}

// answerText returns the text of the last assistant message of items.
func answerText(items []protocol.Item) string {
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Type == protocol.ItemMessage {
			return items[i].Text()
		}
	}
	return ""
}

func start(t *testing.T, cfg Config) (*Rollout, *recorder) {
	t.Helper()
	rec := newRecorder()
	if cfg.Sink == nil {
		cfg.Sink = rec
	}
	if cfg.Model == nil {
		cfg.Model = NewSim(SimOptions{})
	}
	if cfg.Settings.Model == "" {
		cfg.Settings.Model = "sim"
		cfg.Settings.ParallelToolCalls = true
	}
	r := Start(context.Background(), cfg)
	t.Cleanup(func() {
		r.Cancel("test cleanup")
		r.Wait()
	})
	return r, rec
}
