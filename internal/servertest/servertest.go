// Package servertest starts Tether in-process for the tests of other packages: server.New on an
// httptest server, shut down when the test ends, its logs sent to the test's log.
package servertest

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
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

// Metric returns the value of the /metrics sample named exactly name (labels included) of the
// server at base ("http://127.0.0.1:PORT"); it fails the test when there is none.
func Metric(t testing.TB, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("%s not in /metrics", name)
	return 0
}
