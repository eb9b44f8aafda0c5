package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/session"
	"github.com/tetherd/tether/session/store"
)

// stuckStore is a memory store whose Put waits until release is closed (or its ctx ends).
type stuckStore struct {
	store.Store
	entered chan struct{}
	release chan struct{}
}

func newStuckStore() *stuckStore {
	return &stuckStore{Store: store.NewMemory(0, 0), entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (s *stuckStore) Put(ctx context.Context, r *store.Response) error {
	s.entered <- struct{}{}
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.Put(ctx, r)
}

// A store write that hangs holds only its own connection: with one server-wide sampling
// admission (-max-sampling 1), another connection's rollout still runs to its end.
func TestSlowStoreDoesNotStallOtherConnections(t *testing.T) {
	st := newStuckStore()
	_, url := testServer(t, Options{Store: st, StoreTimeout: time.Minute, MaxSampling: 1})
	a := wstest.Dial(t, url, nil)
	a.Send(publicCreate("stored", true, "0"))
	<-st.entered // a's write hangs, after its sampling step
	b := wstest.Dial(t, url, nil)
	fs := publicTurn(b, publicCreate("not stored", false, "1"))
	if l := fs[len(fs)-1]; l.Type() != "response.completed" {
		t.Fatalf("other connection: %s", l.Type())
	}
	close(st.release)
	fs = a.Until("response.completed", "response.failed")
	if l := fs[len(fs)-1]; l.Type() != "response.completed" {
		t.Fatalf("stored response after the write went through: %s", l.Type())
	}
}

// A store write that does not answer within -store-timeout fails the response with
// store_unavailable, and the connection carries on.
func TestStoreTimeoutFailsTheResponse(t *testing.T) {
	st := newStuckStore()
	s, url := testServer(t, Options{Store: st, StoreTimeout: 50 * time.Millisecond})
	c := wstest.Dial(t, url, nil)
	fs := publicTurn(c, publicCreate("stored", true, "0"))
	if l := fs[len(fs)-1]; l.Type() != "response.failed" || l.Str("response", "error", "code") != "store_unavailable" {
		t.Fatalf("timed-out write: %s %v", l.Type(), l.Get("response", "error"))
	}
	fs = publicTurn(c, publicCreate("not stored", false, "0"))
	if l := fs[len(fs)-1]; l.Type() != "response.completed" {
		t.Fatalf("next response on the connection: %s", l.Type())
	}
	if s.store.Errors() != 1 {
		t.Fatalf("store errors = %d, want 1", s.store.Errors())
	}
	close(st.release)
}

// One registry per connection: the public shape's ended segments are entries of the
// connection core's registry, which evicts them (counted in tether_evictions_total) and ends a
// suspended rollout whose latest segment went.
func TestPublicShapeKeepsOneRegistry(t *testing.T) {
	s, url := testServer(t, Options{Limits: session.Limits{CacheResponses: 2}})
	c := wstest.Dial(t, url, nil)
	var ids []string
	for range 4 {
		fs := publicTurn(c, publicCreate("hi", false, "0"))
		ids = append(ids, fs[0].Str("response", "id"))
	}
	s.mu.Lock()
	var conns []*session.Conn
	for conn := range s.conns {
		conns = append(conns, conn)
	}
	s.mu.Unlock()
	if len(conns) != 1 {
		t.Fatalf("%d connections", len(conns))
	}
	// Answers suspend their rollout (a continuation may take the hot path); evicting the
	// segment of one ends it, and the core forgets it.
	// (An evicted rollout ends asynchronously: wait for it.)
	for i, id := range ids {
		evicted := i < 2
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			_, _, ok := conns[0].Chain(id)
			if ok != evicted {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rollout %d (evicted %v): in the connection core = %v", i, evicted, ok)
			}
		}
	}
	if n := s.metrics.Evictions.Load(); n != 2 {
		t.Errorf("evictions = %d, want 2 (4 segments, a registry of 2)", n)
	}
	// The newest segment is still continued on the connection (store:false: no store), the
	// oldest is gone.
	publicTurn(c, publicCreate("again", false, "0", ids[3]))
	c.Send(publicCreate("again", false, "0", ids[0]))
	c.ExpectError(400, "previous_response_not_found", "previous_response_id")
	// The kept segments' bytes are held in the memory budget, each released exactly once:
	// by its eviction, or when the connection closes.
	_ = c.C.CloseNow()
	waitFor(t, func() bool { return s.Budget().InUse() == 0 })
}

// A draining instance fails /healthz, so that a load balancer stops sending it connections.
func TestHealthzFailsWhileDraining(t *testing.T) {
	s, url := testServer(t, Options{})
	if code, body := do(t, "GET", httpURL(url, "/healthz"), "", ""); code != 200 || body["status"] != "ok" {
		t.Fatalf("/healthz: %d %v", code, body)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, body := do(t, "GET", httpURL(url, "/healthz"), "", ""); code != 503 || body["status"] != "shutting_down" {
		t.Fatalf("/healthz while draining: %d %v, want 503 draining", code, body)
	}
}

// failingStore is a memory store whose reads fail, as a store past -store-timeout does.
type failingStore struct{ store.Store }

func (failingStore) Get(context.Context, string, string) (*store.Response, error) {
	return nil, errors.New("the store does not answer")
}

// A GET the store cannot answer is 503 store_unavailable with Retry-After: 1, as every 503
// of a server that may answer a second later: the OpenAI SDKs wait that long, then retry.
func TestStoreUnavailableRetryAfter(t *testing.T) {
	_, url := testServer(t, Options{Store: failingStore{store.NewMemory(0, 0)}})
	base := "http" + strings.TrimSuffix(strings.TrimPrefix(url, "ws"), "/v1/responses")
	resp, err := http.Get(base + "/v1/responses/resp_0123456789abcdef0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"store_unavailable"`) {
		t.Fatalf("GET with a failing store: %d %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Retry-After"); got != "1" {
		t.Fatalf("503 store_unavailable: Retry-After %q, want \"1\"", got)
	}
}
