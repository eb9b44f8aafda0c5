package ui

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
)

var shellTool = map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{
	"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}, "required": []string{"cmd"}}}

// openRollout opens an append-shape connection and leaves one rollout suspended at its first
// tool call; it returns the rollout's Response id.
func openRollout(t *testing.T, url, key string) string {
	t.Helper()
	h := http.Header{}
	h.Set("OpenAI-Beta", server.AppendBeta)
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	c := wstest.Dial(t, "ws"+url[len("http"):]+"/v1/responses", h)
	c.Send(map[string]any{"type": "response.create", "model": "sim", "input": "List the files.", "tools": []any{shellTool},
		"metadata": map[string]string{"sim.calls": "2", "sim.speed": "instant"}})
	return c.Until("response.done")[0].Str("response", "id")
}

func TestLive(t *testing.T) {
	_, url := start(t, server.Options{}, 0)
	var l Live
	if code := call(t, "GET", url+"/ui/api/live", "", "", &l); code != 200 || l.Totals.Connections != 0 || l.Connections == nil {
		t.Fatalf("empty server: %d %+v", code, l)
	}
	id := openRollout(t, url, "")
	call(t, "GET", url+"/ui/api/live", "", "", &l)
	if l.Totals != (LiveTotals{Connections: 1, Suspended: 1}) || len(l.Connections) != 1 {
		t.Fatalf("live %+v", l)
	}
	c := l.Connections[0]
	if c.Shape != server.ShapeAppend || c.Remote == "" || c.AgeS <= 0 || len(c.Rollouts) != 1 {
		t.Fatalf("connection %+v", c)
	}
	r := c.Rollouts[0]
	if r.ID != id || r.State != "suspended" || r.Turns != 1 || r.InputTokens == 0 || r.OutputTokens == 0 || r.ContextTokens == 0 || r.AgeS <= 0 {
		t.Fatalf("rollout %+v", r)
	}
}

// TestKeys: with API keys the API needs one (401 like /v1), the page itself does not, and the
// race's client uses the caller's key against /v1.
func TestKeys(t *testing.T) {
	_, url := start(t, server.Options{Keys: server.NewKeys("sk-demo")}, 0)
	resp, err := http.Get(url + "/ui/app.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") ||
		!strings.Contains(resp.Header.Get("Content-Type"), "javascript") {
		t.Fatalf("app.js without key: %d %v", resp.StatusCode, resp.Header)
	}
	if code := call(t, "GET", url+"/ui/", "", "", nil); code != 200 {
		t.Fatalf("page without key: %d", code)
	}
	if code := call(t, "GET", url+"/ui", "", "", nil); code != 200 { // redirected to /ui/
		t.Fatalf("/ui without key: %d", code)
	}
	for _, p := range []struct{ method, path string }{{"GET", "/ui/api/live"}, {"POST", "/ui/api/race"}, {"GET", "/ui/api/race"}, {"GET", "/ui/api/race/events"}} {
		var e apiError
		if code := call(t, p.method, url+p.path, "wrong", "{}", &e); code != 401 || e.Error.Code != "invalid_api_key" {
			t.Errorf("%s %s with a wrong key: %d %+v", p.method, p.path, code, e)
		}
	}
	openRollout(t, url, "sk-demo")
	var l Live
	if code := call(t, "GET", url+"/ui/api/live", "sk-demo", "", &l); code != 200 || l.Totals.Suspended != 1 {
		t.Fatalf("live with key: %d %+v", code, l.Totals)
	}
	if code := call(t, "POST", url+"/ui/api/race", "sk-demo", `{"speed":"4000","calls":1,"transports":["http","append"]}`, nil); code != 202 {
		t.Fatalf("start with key: %d", code)
	}
	evs := events(t, url, "sk-demo")
	if last := evs[len(evs)-1]; last.Type != "done" {
		t.Fatalf("race with key ended %s %s", last.Type, last.Data)
	}
}
