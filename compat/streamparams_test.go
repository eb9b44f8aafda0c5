package compat_test

import (
	"testing"

	"github.com/tetherd/tether/internal/server"
)

// TestStreamParamsInBody: a GET of a background response's events takes starting_after from
// a JSON body too, as it takes stream there (the query wins when both have one), and a body
// member of the wrong type is refused naming it rather than ignored.
func TestStreamParamsInBody(t *testing.T) {
	f := newFixture(t, server.Options{})
	ctx := t.Context()
	id := jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses", bgCreate("a short answer", nil)), 200).Str("id")
	all := openSSE(t, do(t, ctx, "GET", f.base+"/responses/"+id+"?stream=true", nil)).rest() // to its end
	url := f.base + "/responses/" + id
	for _, c := range []struct {
		name  string
		query string
		body  any
		first int
	}{
		{"body", "", map[string]any{"stream": true, "starting_after": 3}, 4},
		{"query stream, body starting_after", "?stream=true", map[string]any{"starting_after": 2}, 3},
		{"the query wins", "?starting_after=1", map[string]any{"stream": true, "starting_after": 5}, 2},
		{"null", "", map[string]any{"stream": true, "starting_after": nil}, 0},
	} {
		got := openSSE(t, do(t, ctx, "GET", url+c.query, c.body)).rest()
		checkSeq(t, got, c.first)
		if len(got) != len(all)-c.first {
			t.Fatalf("%s: %d events, want %d", c.name, len(got), len(all)-c.first)
		}
	}
	for _, c := range []struct {
		body        any
		code, param string
	}{
		{map[string]any{"stream": "yes"}, "invalid_type", "stream"},
		{map[string]any{"stream": true, "starting_after": "3"}, "invalid_type", "starting_after"},
		{map[string]any{"stream": true, "starting_after": 2.5}, "invalid_type", "starting_after"},
		{map[string]any{"stream": true, "starting_after": -1}, "invalid_value", "starting_after"},
		{[]any{1}, "invalid_json", ""},
	} {
		e := jsonAnswer(t, do(t, ctx, "GET", url, c.body), 400)
		if e.Str("error", "code") != c.code || e.Str("error", "param") != c.param {
			t.Fatalf("body %v: %v, want %s on %q", c.body, e, c.code, c.param)
		}
	}
}
