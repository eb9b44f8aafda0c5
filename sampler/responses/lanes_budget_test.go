package responses_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/responses"
)

// gatedModel is the responses backend with its rollouts' memory budget behind a gate: the
// first reservation of at least gatedBudget.big bytes waits until the test opens the gate, as
// one that waits for suspended rollouts to park under memory pressure does.
type gatedModel struct {
	*responses.Model
	gate *gatedBudget
}

func (m gatedModel) Open(ctx context.Context, info sampler.RolloutInfo) (sampler.ModelSession, error) {
	m.gate.mu.Lock()
	m.gate.inner = info.Budget
	m.gate.mu.Unlock()
	info.Budget = m.gate
	return m.Model.Open(ctx, info)
}

// gatedBudget is a sampler.Budget that holds its first reservation of big bytes or more
// until open is closed; waiting is closed when that reservation has begun to wait.
type gatedBudget struct {
	big     int64
	waiting chan struct{}
	open    chan struct{}

	mu    sync.Mutex // guards inner, held
	inner sampler.Budget
	held  bool // the gate has held a reservation
}

func (g *gatedBudget) TryReserve(n int64) bool {
	g.mu.Lock()
	hold := n >= g.big && !g.held
	g.held = g.held || hold
	g.mu.Unlock()
	if hold {
		close(g.waiting)
		<-g.open
	}
	return g.budget().TryReserve(n)
}

func (g *gatedBudget) Grow(n int64) { g.budget().Grow(n) }

func (g *gatedBudget) Release(n int64) { g.budget().Release(n) }

// budget returns the Budget the gate stands in front of (the last Open set it).
func (g *gatedBudget) budget() sampler.Budget {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inner
}

// laneUpstream is a Responses upstream that answers a create whose input says "big" with one
// 64 KiB text delta, and any other with a short text, each in a Response of its own.
func laneUpstream(t *testing.T) *httptest.Server {
	big := frameOf("response.output_text.delta", map[string]any{"delta": strings.Repeat("b", 64<<10)})
	small := frameOf("response.output_text.delta", map[string]any{"delta": "small answer"})
	added := frameOf("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"type": "message", "role": "assistant"}})
	us := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		for {
			_, create, err := c.Read(ctx)
			if err != nil {
				return
			}
			delta := small
			if strings.Contains(string(create), "big") {
				delta = big
			}
			for _, f := range []string{`{"type":"response.created","response":{"id":"resp_up","status":"in_progress"}}`, added, delta,
				`{"type":"response.completed","response":{"id":"resp_up","status":"completed","usage":{"input_tokens":1,"output_tokens":1}}}`} {
				if c.Write(ctx, websocket.MessageText, []byte(f)) != nil {
					return
				}
			}
		}
	}))
	t.Cleanup(us.Close)
	return us
}

// TestBudgetWaitStallsOneLane: a rollout whose step waits for room in the memory budget (the
// reservation of its upstream frame as the socket's reader reads it, or of its text as it
// accrues) holds up its own lane only: every lane of a client connection has a socket and a
// reader of its own, and a lane's rollouts sample one at a time, so another lane's response
// streams and completes meanwhile; the waiting one completes once the wait ends.
func TestBudgetWaitStallsOneLane(t *testing.T) {
	us := laneUpstream(t)
	gate := &gatedBudget{big: 16 << 10, waiting: make(chan struct{}), open: make(chan struct{})}
	var once sync.Once
	openGate := func() { once.Do(func() { close(gate.open) }) }
	t.Cleanup(openGate) // a failed test does not leave the reader waiting
	_, front := startFront(t, server.Options{Model: gatedModel{backend(t, us, responses.Options{Timeout: 20 * time.Second}), gate}})
	c := wstest.Dial(t, wsURL(front), appendHeader)

	c.Send(map[string]any{"type": "response.create", "model": "m", "input": "big", "stream_id": "big"})
	select {
	case <-gate.waiting:
	case <-time.After(20 * time.Second):
		t.Fatal("the big step's reservation never came")
	}
	c.Send(map[string]any{"type": "response.create", "model": "m", "input": "small"})
	fs := c.Until("response.completed", "response.failed", "response.incomplete")
	last := fs[len(fs)-1]
	if last.Type() != "response.completed" || last.Str("stream_id") != "" || answer(last) != "small answer" {
		t.Fatalf("while the big lane waits for the budget, the default lane ended with %v", last)
	}
	for _, f := range fs {
		if f.Str("stream_id") == "big" && (f.Type() == "response.output_text.delta" || strings.HasPrefix(f.Type(), "response.output_text.done")) {
			t.Fatalf("the big lane's text came while its reservation waited: %v", f)
		}
	}
	openGate()
	fs = c.Until("response.completed", "response.failed", "response.incomplete")
	if last := fs[len(fs)-1]; last.Type() != "response.completed" || last.Str("stream_id") != "big" || len(answer(last)) != 64<<10 {
		t.Fatalf("the big lane, once its reservation got its answer, ended with %s %v", last.Type(), last.Get("response", "error"))
	}
}
