package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/internal/skipnote"
	"github.com/tetherd/tether/sampler/sim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(skipnote.M(m, "internal/ui")) }

// start runs a server with the sim in real time (as tether serve's) and the UI in front of it,
// on a real socket, until the test ends.
func start(t *testing.T, opts server.Options, raceTimeout time.Duration) (*UI, string) {
	t.Helper()
	if opts.Model == nil {
		opts.Model = sim.NewSim(sim.SimOptions{Realtime: true})
	}
	if opts.Logger == nil {
		opts.Logger = servertest.Logger(t, slog.LevelWarn)
	}
	srv := server.New(opts)
	var h http.Handler = srv
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	u := New(Options{Server: srv, URL: ts.URL, RaceTimeout: raceTimeout, Logger: opts.Logger})
	h = u.Handler(srv)
	t.Cleanup(func() {
		u.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		ts.Close()
	})
	return u, ts.URL
}

// call sends a request with an optional Bearer key and decodes the JSON answer into out (when
// not nil). It returns the status.
func call(t *testing.T, method, url, key, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, url, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

type sseEvent struct {
	Type string
	Data json.RawMessage
}

// events reads the race's event stream to its end.
func events(t *testing.T, url, key string) []sseEvent {
	t.Helper()
	return readEvents(t, openEvents(t, url, key))
}

// openEvents opens the race's event stream (the server has attached it when this returns).
func openEvents(t *testing.T, url, key string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/ui/api/race/events", nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp
}

// readEvents reads an event stream to its end.
func readEvents(t *testing.T, resp *http.Response) []sseEvent {
	t.Helper()
	defer resp.Body.Close()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.Type = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data = json.RawMessage(strings.TrimPrefix(line, "data: "))
		case line == "":
			out = append(out, cur)
			cur = sseEvent{}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
