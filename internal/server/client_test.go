package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/wstest"
)

// testServer starts Tether on an httptest server with opts; logs go to t.Logf.
func testServer(t *testing.T, opts Options) (*Server, string) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	s := New(opts)
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		hs.Close()
	})
	return s, "ws" + strings.TrimPrefix(hs.URL, "http") + "/v1/responses"
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func dialAppend(t *testing.T, url string) *wstest.Client {
	t.Helper()
	h := http.Header{}
	h.Add("OpenAI-Beta", "responses_websockets=2026-02-06, "+AppendBeta)
	return wstest.Dial(t, url, h)
}
