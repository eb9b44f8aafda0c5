package client_test

import (
	"context"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

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
