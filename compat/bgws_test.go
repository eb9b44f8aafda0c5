package compat_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
)

// runningOn starts a background response on f that runs for minutes, cancelled when the test
// ends, and returns its id.
func runningOn(t *testing.T, f *fixture) string {
	t.Helper()
	id := jsonAnswer(t, do(t, t.Context(), "POST", f.base+"/responses", bgCreate("a very long answer", map[string]any{"metadata": slow("100000")})), 200).Str("id")
	t.Cleanup(func() { do(t, context.Background(), "POST", f.base+"/responses/"+id+"/cancel", nil).Body.Close() })
	return id
}

// wsContinuationWaits checks that a response.create naming background response id, which
// still runs, is answered at f over both WebSocket shapes as over HTTP: an error frame 409
// response_in_progress naming it, param previous_response_id; the connection stays usable.
func wsContinuationWaits(t *testing.T, f *fixture, id string) {
	t.Helper()
	for shape, c := range map[string]*wstest.Client{"public": f.dial(t), "append": dialAppend(t, f)} {
		c.Send(create("next", map[string]any{"previous_response_id": id}))
		if e := c.ExpectError(409, "response_in_progress", "previous_response_id"); !strings.Contains(e.Str("error", "message"), id) {
			t.Fatalf("%s shape: the error does not name %s: %v", shape, id, e)
		}
		c.Send(create("hello", nil))
		if end := final(c.Until("response.completed", "response.done", "response.incomplete", "response.failed")); end.Type() != "response.completed" && end.Type() != "response.done" {
			t.Fatalf("%s shape: a create after the error ends %v", shape, end)
		}
	}
}

// TestBackgroundContinuationOverWebSocket: a WebSocket response.create (public shape and
// append shape) whose previous_response_id names a background response that is still running
// is answered 409 response_in_progress, as the HTTP create is (continuationWaits), rather than
// previous_response_not_found; on a shared store, so it is on an instance that does not run
// it.
func TestBackgroundContinuationOverWebSocket(t *testing.T) {
	t.Run("same instance", func(t *testing.T) {
		f := newFixture(t, realtime(server.Options{}))
		id := runningOn(t, f)
		continuationWaits(t, t.Context(), f.base, id)
		wsContinuationWaits(t, f, id)
	})
	t.Run("shared store", func(t *testing.T) {
		a, b := sharedPair(t, server.Options{}, server.Options{})
		id := runningOn(t, a)
		continuationWaits(t, t.Context(), b.base, id)
		wsContinuationWaits(t, b, id)
	})
}
