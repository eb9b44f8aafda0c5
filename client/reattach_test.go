package client_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tetherd/tether/client"
	"github.com/tetherd/tether/internal/redistest"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
	"github.com/tetherd/tether/session/store"
)

// switchProxy is one URL in front of several servers: a reverse proxy that forwards every
// request (WebSocket upgrades included) to the server set last.
type switchProxy struct{ target atomic.Pointer[url.URL] }

func (p *switchProxy) set(t *testing.T, base string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	p.target.Store(u)
}

func (p *switchProxy) start(t *testing.T) string {
	hs := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(p.target.Load()) }})
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestReattachAfterShutdown: two servers sharing one real Redis behind one URL. While the
// client runs a tool, the instance holding the rollout shuts down (the proxy now sends new
// connections to the other): it parks the rollout to Redis and says so; the client redials by
// itself and appends, and the other instance resumes the same Response hot, to its end.
func TestReattachAfterShutdown(t *testing.T) {
	rs := redistest.Start(t)
	start := func() (*server.Server, string) {
		st, err := store.NewRedis(context.Background(), rs.URL(), store.RedisOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return servertest.Start(t, server.Options{Store: st})
	}
	a, aBase := start()
	b, bBase := start()
	var p switchProxy
	p.set(t, aBase)
	c := dial(t, p.start(t)+"/v1", nil)
	ctx := ctxT(t)
	var created []string
	calls := 0
	resp, err := c.Run(ctx, twoCalls("survive the instance"), client.RunOptions{
		Tools: map[string]client.ToolFunc{"exec_command": func(ctx context.Context, call client.Call) (string, error) {
			calls++
			if calls == 1 { // the instance goes away while the tool runs
				p.set(t, bBase)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					_ = a.Shutdown(ctx)
				}()
				select {
				case <-c.LinkDone():
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
			return "ran", nil
		}},
		OnEvent: func(ev client.Event) {
			if ev.Type == "response.created" {
				created = append(created, ev.ResponseID)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != "completed" || len(created) != 1 || resp.ID != created[0] || len(resp.Output) != 3 {
		t.Fatalf("final %s %s with %d items; Responses %v: want one Response, completed, 3 items", resp.ID, resp.Status, len(resp.Output), created)
	}
	if resp.Usage == nil || resp.Usage.InputTokensDetails.CachedTokens == 0 {
		t.Fatalf("not resumed hot: usage %+v", resp.Usage)
	}
	if a.Metrics().StoreParks.Load() != 1 || b.Metrics().Claims.Load() != 1 {
		t.Fatalf("A parked %d to the store, B claimed %d: want 1 and 1", a.Metrics().StoreParks.Load(), b.Metrics().Claims.Load())
	}
}

// cluster is three servers sharing one real Redis behind one switchProxy, which counts the
// upgrades refused with 503 by a server or 502 by the proxy itself (no server at its target)
// and runs onRefused after each.
type cluster struct {
	srv       [3]*server.Server
	base      [3]string
	p         switchProxy
	url       string
	refused   atomic.Int64
	onRefused func(n int64)
	rc        *redis.Client
}

func newCluster(t *testing.T) *cluster {
	rs := redistest.Start(t)
	k := &cluster{rc: redis.NewClient(&redis.Options{Addr: rs.Addr()})}
	t.Cleanup(func() { _ = k.rc.Close() })
	for i := range k.srv {
		st, err := store.NewRedis(context.Background(), rs.URL(), store.RedisOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		k.srv[i], k.base[i] = servertest.Start(t, server.Options{Store: st})
	}
	k.p.set(t, k.base[0])
	refused := func() {
		if n := k.refused.Add(1); k.onRefused != nil {
			k.onRefused(n)
		}
	}
	hs := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(k.p.target.Load()) },
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusServiceUnavailable {
				refused()
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			w.WriteHeader(http.StatusBadGateway) // no server there
			refused()
		}})
	t.Cleanup(hs.Close)
	k.url = hs.URL + "/v1"
	return k
}

// parkOn0 starts a two-call rollout on server 0 and shuts server 0 down while the rollout
// waits for its first outputs: it is parked to Redis (response.parked) and the client
// detaches it. The proxy then sends new connections to server next.
func (k *cluster) parkOn0(t *testing.T, c *client.Conn, next int) (*client.Rollout, *client.Suspension) {
	t.Helper()
	ctx := ctxT(t)
	r, err := c.Start(ctx, twoCalls("survive the instance"))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range r.Events(ctx) {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := r.Suspension()
	if s == nil {
		t.Fatal("not suspended")
	}
	k.p.set(t, k.base[next])
	done := c.LinkDone()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := k.srv[0].Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if n := k.srv[0].Metrics().StoreParks.Load(); n != 1 {
		t.Fatalf("server 0 parked %d rollouts to the store, want 1", n)
	}
	return r, s
}

// resumedOn2 appends the outputs of s and checks that server 2 resumed the same Response hot
// from the store.
func (k *cluster) resumedOn2(t *testing.T, r *client.Rollout, s *client.Suspension) {
	t.Helper()
	ctx := ctxT(t)
	id := r.ID()
	if err := r.Append(ctx, s.Calls[0].Output("ran")); err != nil {
		t.Fatal(err)
	}
	var last client.Event
	for ev, err := range r.Events(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	if last.Suspended == nil || last.ResponseID != id {
		t.Fatalf("after the reattach: %s of %s, want response.done of %s", last.Type, last.ResponseID, id)
	}
	if last.Suspended.Usage.InputTokensDetails.CachedTokens == 0 {
		t.Fatalf("not resumed hot: usage %+v", last.Suspended.Usage)
	}
	if n := k.srv[2].Metrics().Claims.Load(); n != 1 {
		t.Fatalf("server 2 claimed %d rollouts, want 1", n)
	}
}

// TestReattachRetriedWhileInstancesDrain: the rollout's instance parks it as it shuts down,
// and the client's reattach meets a gateway with no instance (502: the proxy points at a
// closed port), then an instance that drains too (503 server_shutting_down), then server 2.
// The client retries by itself, and server 2 resumes the same Response hot.
func TestReattachRetriedWhileInstancesDrain(t *testing.T) {
	k := newCluster(t)
	k.srv[1].BeginShutdown() // refuses upgrades: 503 server_shutting_down
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	k.onRefused = func(n int64) {
		switch n {
		case 1:
			k.p.set(t, k.base[1])
		case 2:
			k.p.set(t, k.base[2])
		}
	}
	c := dial(t, k.url, nil)
	r, s := k.parkOn0(t, c, 0)
	k.p.set(t, closed)
	k.resumedOn2(t, r, s)
	if n := k.refused.Load(); n != 2 {
		t.Fatalf("%d upgrades refused, want 2", n)
	}
}

// TestReattachOnAWebSocketThatDrains: the reattach's new WebSocket is accepted by server 1,
// which shuts down before the append reaches it: the WebSocket closes 1001 without an answer
// (the hook that sees the append go out waits for that close). The rollout is still in the
// store: Events sends the append again, to server 2, which resumes it hot.
func TestReattachOnAWebSocketThatDrains(t *testing.T) {
	k := newCluster(t)
	var once sync.Once
	var c *client.Conn
	c = dial(t, k.url, &client.Options{Trace: func(sent bool, frame []byte) {
		if sent && bytes.Contains(frame, []byte(`"response.append"`)) {
			once.Do(func() {
				k.p.set(t, k.base[2])
				done := c.LinkDone()
				k.srv[1].BeginShutdown()
				<-done
			})
		}
	}})
	r, s := k.parkOn0(t, c, 1)
	k.resumedOn2(t, r, s)
	if n := k.srv[1].Metrics().Claims.Load(); n != 0 {
		t.Fatalf("server 1, draining, claimed %d rollouts", n)
	}
}

// TestAppendCrossingParked: the client appends on the old WebSocket at the moment its server
// shuts down: the hook that sees the append go out shuts server 0 down and waits until it has
// (response.parked, then close 1001, before the append reaches it). The append is never
// answered there; the rollout is parked, so the client sends the append again, to server 2,
// which resumes it hot. Were the rollout forgotten by its WebSocket at response.parked, it
// would wait for ever.
func TestAppendCrossingParked(t *testing.T) {
	k := newCluster(t)
	var once sync.Once
	c := dial(t, k.url, &client.Options{Trace: func(sent bool, frame []byte) {
		if sent && bytes.Contains(frame, []byte(`"response.append"`)) {
			once.Do(func() {
				k.p.set(t, k.base[2])
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := k.srv[0].Shutdown(ctx); err != nil {
					t.Error(err)
				}
			})
		}
	}})
	ctx := ctxT(t)
	r, err := c.Start(ctx, twoCalls("cross the parked event"))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range r.Events(ctx) {
		if err != nil {
			t.Fatal(err)
		}
	}
	k.resumedOn2(t, r, r.Suspension())
	if n := k.srv[0].Metrics().StoreParks.Load(); n != 1 {
		t.Fatalf("server 0 parked %d rollouts to the store, want 1", n)
	}
}

// TestReattachNotFound: the parked rollout is gone from the store (expired, say) when the
// client reattaches: the refusal, response_not_found, is the rollout's error once; it has
// ended, and a later Append says so without asking a server.
func TestReattachNotFound(t *testing.T) {
	k := newCluster(t)
	c := dial(t, k.url, nil)
	r, s := k.parkOn0(t, c, 1)
	ctx := ctxT(t)
	if err := k.rc.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Append(ctx, s.Calls[0].Output("ran")); err != nil {
		t.Fatal(err)
	}
	var errs []error
	for _, err := range r.Events(ctx) {
		errs = append(errs, err)
	}
	if e, ok := client.AsError(errs[len(errs)-1]); len(errs) != 1 || !ok || e.Code != "response_not_found" {
		t.Fatalf("Events after the reattach: %v, want one response_not_found", errs)
	}
	for ev, err := range r.Events(ctx) {
		t.Fatalf("Events again: %v %v, want nothing", ev.Type, err)
	}
	if err := r.Append(ctx, s.Calls[0].Output("ran")); !errors.Is(err, client.ErrEnded) {
		t.Fatalf("a later Append: %v, want ErrEnded", err)
	}
	if n := k.srv[1].Metrics().Claims.Load(); n != 0 {
		t.Fatalf("server 1 claimed %d", n)
	}
}

// TestReattachRetryAfterClose: the reattach's new WebSocket closes 1001 before its append is
// answered (server 1 shuts down), so the append waits in the rollout's queue to be sent again
// by Events; the Conn is closed first. Events then returns ErrClosed once, without sending
// anything, and the rollout has ended: Events again yields nothing, Suspension is nil and
// Append returns ErrClosed.
func TestReattachRetryAfterClose(t *testing.T) {
	k := newCluster(t)
	var once sync.Once
	var c *client.Conn
	c = dial(t, k.url, &client.Options{Trace: func(sent bool, frame []byte) {
		if sent && bytes.Contains(frame, []byte(`"response.append"`)) {
			once.Do(func() {
				done := c.LinkDone()
				k.srv[1].BeginShutdown()
				<-done
			})
		}
	}})
	r, s := k.parkOn0(t, c, 1)
	ctx := ctxT(t)
	if err := r.Append(ctx, s.Calls[0].Output("ran")); err != nil {
		t.Fatal(err)
	}
	k.p.set(t, k.base[2]) // an instance that would take the append, were it sent
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var errs []error
	for _, err := range r.Events(ctx) {
		errs = append(errs, err)
	}
	if len(errs) != 1 || !errors.Is(errs[0], client.ErrClosed) {
		t.Fatalf("Events after Close: %v, want one ErrClosed", errs)
	}
	for ev, err := range r.Events(ctx) {
		t.Fatalf("Events again: %q %v, want nothing", ev.Type, err)
	}
	if r.Suspension() != nil {
		t.Error("Suspension after Close: still suspended")
	}
	checkClosed(t, "Append", func() error { return r.Append(ctx, s.Calls[0].Output("late")) })
	if n := k.srv[2].Metrics().Claims.Load(); n != 0 {
		t.Fatalf("server 2 claimed %d rollouts after Close", n)
	}
}
