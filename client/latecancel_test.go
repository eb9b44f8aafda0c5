package client_test

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/tetherd/tether/client"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/sampler/sim"
)

// TestSecondCancelAnswer: the server answers a second response.cancel of a rollout with
// response_already_completed right after the rollout's terminal event. That error belongs to
// the cancelled rollout, which has ended: it must not end another rollout's request, neither
// a create queued behind the cancelled rollout nor an append sent after the cancels. The
// server's frames reach the client through a proxy that holds each back for 20 ms, so that
// both cancels and the append are sent before the terminal event arrives.
func TestSecondCancelAnswer(t *testing.T) {
	base := servertestURL(t, server.Options{Model: sim.NewSim(sim.SimOptions{Realtime: true})})
	c := dial(t, delayProxy(t, base, 20*time.Millisecond), nil)
	ctx := ctxT(t)
	for i := range 10 {
		other := twoCalls("suspended on another lane")
		other.StreamID = "other"
		o, err := c.Start(ctx, other)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range o.Events(ctx) {
			if err != nil {
				t.Fatal(err)
			}
		}
		s := o.Suspension()
		if s == nil {
			t.Fatalf("try %d: the other lane's rollout did not suspend", i)
		}
		a, err := c.Start(ctx, client.CreateRequest{Model: "sim", Input: []client.Item{client.UserMessage("cancel me twice")},
			Metadata: map[string]string{"sim.speed": "1000", "sim.answer_tokens": "2000"}})
		if err != nil {
			t.Fatal(err)
		}
		for ev := range a.Events(ctx) {
			if ev.Type == "response.created" {
				break
			}
		}
		b, err := c.Start(ctx, client.CreateRequest{Model: "sim", Input: []client.Item{client.UserMessage("queued behind")}})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if err := o.Append(ctx, s.Calls[0].Output("ran")); err != nil {
			t.Fatal(err)
		}
		for _, err := range a.Events(ctx) {
			if err != nil {
				t.Fatalf("try %d: the cancelled rollout: %v", i, err)
			}
		}
		if resp := a.Response(); resp == nil || resp.Status != "incomplete" {
			t.Fatalf("try %d: the cancelled rollout ended %v", i, status(resp))
		}
		for name, r := range map[string]*client.Rollout{"the queued create": b, "the other lane's append": o} {
			for _, err := range r.Events(ctx) {
				if err != nil {
					t.Fatalf("try %d: %s got %v", i, name, err)
				}
			}
		}
		if resp := b.Response(); resp == nil || resp.Status != "completed" {
			t.Fatalf("try %d: the queued create ended %v", i, status(resp))
		}
		if o.Suspension() == nil {
			t.Fatalf("try %d: the other lane's rollout did not reach its second call", i)
		}
		if err := o.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		for _, err := range o.Events(ctx) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// status is resp's status, or "no Response".
func status(resp *client.Response) string {
	if resp == nil {
		return "no Response"
	}
	return resp.Status
}

// servertestURL starts a server with opts for the test and returns its API base URL.
func servertestURL(t *testing.T, opts server.Options) string {
	_, base := servertest.Start(t, opts)
	return base + "/v1"
}

// delayProxy is a TCP proxy in front of the server at base ("http://host:port/v1") that
// passes the client's bytes on at once and the server's each d after they came, in order. It
// returns the proxy's base URL; its connections end with the test.
func delayProxy(t *testing.T, base string, d time.Duration) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				down.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, down, up)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(up, down); up.Close() })
			wg.Go(func() { delayCopy(down, up, d); down.Close() })
		}
	})
	u.Host = ln.Addr().String()
	return u.String()
}

// delayCopy copies src to dst, each chunk d after it was read, until src ends.
func delayCopy(dst io.Writer, src io.Reader, d time.Duration) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	ch := make(chan chunk, 1024)
	go func() {
		defer close(ch)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				ch <- chunk{b[:n], time.Now().Add(d)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range ch {
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.b); err != nil {
			for range ch {
			}
			return
		}
	}
}
