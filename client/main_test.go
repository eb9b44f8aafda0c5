package client_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/internal/server"
)

// exampleURL is the base URL of the server the Example functions use, started by TestMain.
var exampleURL string

func TestMain(m *testing.M) { goleak.VerifyTestMain(withServer{m}) }

// withServer runs the tests with an in-process Tether server for the examples, shut down
// before goleak looks for leaked goroutines.
type withServer struct{ m *testing.M }

func (w withServer) Run() int {
	srv := server.New(server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	hs := httptest.NewServer(srv)
	exampleURL = hs.URL + "/v1"
	code := w.m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	hs.Close()
	return code
}

// stripProxy is a reverse proxy in front of a server that drops the OpenAI-Beta header of
// every request, as a proxy that does not know the append opt-in does: the server then speaks
// the public shape. It counts the requests it forwards.
func stripProxy(t *testing.T, base string) (string, *atomic.Int64) {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	p := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Header.Del("OpenAI-Beta")
		n.Add(1)
	}, ErrorLog: nil}
	hs := httptest.NewServer(p)
	t.Cleanup(hs.Close)
	return hs.URL, &n
}
