package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session"
)

// slowModel streams in real time at the 65 tokens/s preset, so a test can act mid-stream.
func slowModel() sampler.Model {
	return sim.NewSim(sim.SimOptions{Speed: sim.Speed65, Realtime: true})
}

func (s *Server) connCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func waitNoConns(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.connCount() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still tracked after the client left", s.connCount())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDisconnectWhileStreamingFreesEverything(t *testing.T) {
	s, url := testServer(t, Options{Model: slowModel()})
	ignore := goleak.IgnoreCurrent()
	c := dialAppend(t, url)
	c.Send(create("stream a long answer", map[string]string{"sim.answer_tokens": "500"}))
	c.Until("response.output_text.delta")
	c.C.CloseNow()
	waitNoConns(t, s)
	goleak.VerifyNone(t, ignore)
}

func TestDisconnectWhileSuspendedFreesEverything(t *testing.T) {
	s, url := testServer(t, Options{})
	ignore := goleak.IgnoreCurrent()
	c := dialAppend(t, url)
	for i := 0; i < 3; i++ {
		c.Send(create("task", nil, shell))
		c.Until("response.done")
	}
	c.C.CloseNow()
	waitNoConns(t, s)
	goleak.VerifyNone(t, ignore)
}

func TestShutdownEndsEveryRollout(t *testing.T) {
	s, url := testServer(t, Options{Limits: session.Limits{ShutdownGrace: 5 * time.Second}})
	c := dialAppend(t, url)
	c.Send(create("suspended one", nil, shell))
	fs := c.Until("response.done")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- s.Shutdown(ctx) }()
	fs = append(fs, c.Until("response.incomplete")...)
	checkGrammar(t, fs)
	if r := fs[len(fs)-1].Str("response", "incomplete_details", "reason"); r != "server_shutdown" {
		t.Fatalf("reason %q, want server_shutdown", r)
	}
	c.ExpectClose(websocket.StatusGoingAway)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestShutdownLetsSamplingRolloutFinish(t *testing.T) {
	s, url := testServer(t, Options{Model: slowModel(), Limits: session.Limits{ShutdownGrace: 30 * time.Second}})
	c := dialAppend(t, url)
	c.Send(create("short", nil))
	fs := c.Until("response.output_item.added")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- s.Shutdown(ctx) }()
	fs = append(fs, c.Until("response.completed")...)
	checkGrammar(t, fs)
	c.ExpectClose(websocket.StatusGoingAway)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestHealthzTakesNoServerLock: GET /healthz answers while the server's lock is held (by
// requests and upgrades registering their connections under load), and it still tells the
// drain once it has begun.
func TestHealthzTakesNoServerLock(t *testing.T) {
	s, ws := testServer(t, Options{})
	url := "http" + strings.TrimSuffix(strings.TrimPrefix(ws, "ws"), "/v1/responses") + "/healthz"
	client := &http.Client{Timeout: 10 * time.Second}
	get := func() (int, error) {
		resp, err := client.Get(url)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	s.mu.Lock()
	code, err := get()
	s.mu.Unlock()
	if err != nil || code != http.StatusOK {
		t.Fatalf("/healthz with the server's lock held: %d %v", code, err)
	}
	s.BeginShutdown()
	if code, err := get(); err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("/healthz during the drain: %d %v, want 503", code, err)
	}
}
