// Package servertest starts Tether in-process for the tests of other packages: server.New on an
// httptest server, shut down when the test ends, its logs sent to the test's log.
package servertest

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/server"
)

// Start runs server.New(opts) until the test ends and returns it with its base URL
// ("http://127.0.0.1:PORT"). Without opts.Logger, warnings and errors go to t.Logf.
func Start(t testing.TB, opts server.Options) (*server.Server, string) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = Logger(t, slog.LevelWarn)
	}
	s := server.New(opts)
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		hs.Close()
	})
	return s, hs.URL
}

// Logger returns a logger that writes records of level and above to t.Logf.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: level}))
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
