package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tetherd/tether/internal/wstest"
)

// TestSnapshot lists an append connection and a public one, each with a suspended rollout.
func TestSnapshot(t *testing.T) {
	s, url := testServer(t, Options{})
	a := dialAppend(t, url)
	a.Send(create("task", map[string]string{"sim.calls": "1"}, shell))
	id := a.Until("response.done")[0].Str("response", "id")
	p := wstest.Dial(t, url, nil)
	p.Send(map[string]any{"type": "response.create", "model": "m", "input": "hi"})
	p.Until("response.completed")

	snap := s.Snapshot()
	if len(snap) != 2 || snap[0].Shape != ShapeAppend || snap[1].Shape != ShapePublic {
		t.Fatalf("snapshot %+v", snap)
	}
	if ac := snap[0]; ac.Remote == "" || len(ac.Rollouts) != 1 || ac.Rollouts[0].Key != id ||
		ac.Rollouts[0].State != "suspended" || ac.Rollouts[0].Turns != 1 {
		t.Errorf("append connection %+v", ac)
	}
	// A completed public-shape Response keeps its rollout suspended for a continuation by
	// previous_response_id on the hot path.
	if pc := snap[1]; len(pc.Rollouts) != 1 || pc.Rollouts[0].State != "suspended" {
		t.Errorf("public connection %+v", pc)
	}
}

func TestRequireKey(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	for _, tc := range []struct {
		keys *Keys
		auth string
		want int
	}{
		{nil, "", 204},
		{NewKeys("k"), "", 401},
		{NewKeys("k"), "Bearer x", 401},
		{NewKeys("k"), "Bearer k", 204},
	} {
		h := New(Options{Keys: tc.keys}).RequireKey(ok)
		r := httptest.NewRequest("GET", "/ui/api/live", nil)
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("keys %v, %q: %d, want %d", tc.keys != nil, tc.auth, w.Code, tc.want)
		}
	}
}
