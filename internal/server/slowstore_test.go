package server

import (
	"context"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/store"
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
