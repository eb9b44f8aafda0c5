package server

import (
	"bufio"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session/store"
)

// ctxStore is a memory store whose Put fails once its ctx is done, as a network store (Redis)
// does; every Put's result is reported on puts.
type ctxStore struct {
	*store.Memory
	puts chan error
}

func (s *ctxStore) Put(ctx context.Context, r *store.Response) error {
	err := ctx.Err()
	if err == nil {
		err = s.Memory.Put(ctx, r)
	}
	s.puts <- err
	return err
}

// A store:true rollout that a client's disconnect ends (incomplete, cancelled) is stored as
// it would be in the memory store: the write does not inherit the closed connection's
// cancellation, and it is no store failure.
func TestDisconnectedRolloutIsStored(t *testing.T) {
	st := &ctxStore{Memory: store.NewMemory(0, 0), puts: make(chan error, 16)}
	s, url := testServer(t, Options{Store: st, StoreTimeout: 10 * time.Second})
	h := http.Header{}
	h.Set("OpenAI-Beta", "responses_append=v1")
	c := wstest.Dial(t, url, h)
	c.Send(map[string]any{"type": "response.create", "model": "sim", "input": "suspend here", "store": true,
		"tools": []any{shell}, "metadata": map[string]string{"sim.calls": "1"}})
	fs := c.Until("response.done")
	id := fs[len(fs)-1].Str("response_id")
	_ = c.C.Close(websocket.StatusNormalClosure, "")
	select {
	case err := <-st.puts:
		if err != nil {
			t.Fatalf("the ended rollout's write: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the disconnected rollout was never written")
	}
	r, err := st.Memory.Get(context.Background(), id, "")
	if err != nil {
		t.Fatalf("stored %s: %v", id, err)
	}
	if r.Response.Status != "incomplete" || r.Response.IncompleteDetails == nil || r.Response.IncompleteDetails.Reason != "cancelled" {
		t.Fatalf("stored %s as %s %v", id, r.Response.Status, r.Response.IncompleteDetails)
	}
	if n := s.store.Errors(); n != 0 {
		t.Fatalf("store errors = %d, want 0", n)
	}
}

// respID matches a Response id in an SSE line.
var respID = regexp.MustCompile(`"id":"(resp_[0-9a-f]+)"`)

// A store:true public-shape response that its client's disconnect ends while it samples, over a
// WebSocket or a streamed POST, is stored incomplete (cancelled), as the append shape's is: GET
// /v1/responses/{id} finds the id the client saw in response.created.
func TestDisconnectedPublicResponseIsStored(t *testing.T) {
	for _, via := range []string{"websocket", "sse"} {
		t.Run(via, func(t *testing.T) {
			st := &ctxStore{Memory: store.NewMemory(0, 0), puts: make(chan error, 16)}
			m := newGateModel()
			s, url := testServer(t, Options{Store: st, StoreTimeout: 10 * time.Second, Model: m})
			var id string
			if via == "websocket" {
				c := wstest.Dial(t, url, nil)
				c.Send(map[string]any{"type": "response.create", "model": "sim", "input": "cut me off", "store": true})
				fs := c.Until("response.created")
				id = fs[len(fs)-1].Str("response", "id")
				<-m.entered // sampling, held at the gate
				_ = c.C.Close(websocket.StatusNormalClosure, "")
			} else {
				base := "http" + strings.TrimSuffix(strings.TrimPrefix(url, "ws"), "/v1/responses")
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/responses",
					strings.NewReader(`{"model":"sim","input":"cut me off","store":true,"stream":true}`))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				sc := bufio.NewScanner(resp.Body)
				for id == "" && sc.Scan() {
					if sub := respID.FindStringSubmatch(sc.Text()); sub != nil {
						id = sub[1]
					}
				}
				if id == "" {
					t.Fatalf("no response id in the stream: %v", sc.Err())
				}
				<-m.entered
				cancel()
				resp.Body.Close()
			}
			select {
			case err := <-st.puts:
				if err != nil {
					t.Fatalf("the disconnected response's write: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the disconnected response was never written")
			}
			r, err := st.Memory.Get(context.Background(), id, "")
			if err != nil {
				t.Fatalf("stored %s: %v", id, err)
			}
			if r.Response.Status != "incomplete" || r.Response.IncompleteDetails == nil || r.Response.IncompleteDetails.Reason != "cancelled" {
				t.Fatalf("stored %s as %s %v", id, r.Response.Status, r.Response.IncompleteDetails)
			}
			if len(r.Input) != 1 || r.Input[0].Text() != "cut me off" {
				t.Fatalf("stored input %+v", r.Input)
			}
			if n := s.store.Errors(); n != 0 {
				t.Fatalf("store errors = %d, want 0", n)
			}
		})
	}
}

// A non-streamed POST whose client hangs up while it samples never showed its id to anyone:
// it is answered 499 and not stored.
func TestHungUpJSONPostIsNotStored(t *testing.T) {
	st := &ctxStore{Memory: store.NewMemory(0, 0), puts: make(chan error, 16)}
	m := newGateModel()
	s, url := testServer(t, Options{Store: st, StoreTimeout: 10 * time.Second, Model: m})
	base := "http" + strings.TrimSuffix(strings.TrimPrefix(url, "ws"), "/v1/responses")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/responses",
		strings.NewReader(`{"model":"sim","input":"cut me off","store":true}`))
	req.Header.Set("Content-Type", "application/json")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-m.entered
	cancel()
	<-done
	// the handler records 499 once it has returned, after its rollout ended
	waitFor(t, func() bool { return s.httpErrors.snapshot()[protocol.CodeClientClosed] == 1 })
	select {
	case err := <-st.puts:
		t.Fatalf("a response nobody saw was written (err %v)", err)
	default:
	}
}
