package ui

import (
	"context"
	"embed"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/protocol"
)

//go:embed static
var static embed.FS

// Prefix is the path the page and its API are served under.
const Prefix = "/ui/"

// DefaultRaceTimeout bounds one race when Options.RaceTimeout is 0.
const DefaultRaceTimeout = 3 * time.Minute

// pageCSP is the Content-Security-Policy of the page's files. style-src allows inline styles
// for the SVG charts' and the lanes' computed styles.
const pageCSP = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// MaxStreams bounds the race event streams served at once; over it a stream gets 503.
const MaxStreams = 16

// Options configure New.
type Options struct {
	// Server is the server the page shows (Snapshot) and whose API key check protects the API
	// (RequireKey). Required.
	Server *server.Server
	// URL is the base URL at which the race's client reaches that same server
	// ("http://127.0.0.1:8787"). Required to run races.
	URL string
	// RaceTimeout bounds one race; 0 means DefaultRaceTimeout.
	RaceTimeout time.Duration
	// Logger receives the races' logs; nil means slog.Default().
	Logger *slog.Logger
}

// UI serves the live demo page and its API (see the package doc).
type UI struct {
	// Immutable
	opts   Options
	log    *slog.Logger
	mux    *http.ServeMux
	ctx    context.Context // cancelled by Close: the race and the streams end
	cancel context.CancelFunc

	mu      sync.Mutex // guards cur, streams
	cur     *race      // the running or last race; nil before the first
	streams int
	wg      sync.WaitGroup // the race goroutine and the event streams
}

// New returns the UI of opts.Server.
func New(opts Options) *UI {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.RaceTimeout <= 0 {
		opts.RaceTimeout = DefaultRaceTimeout
	}
	u := &UI{opts: opts, log: opts.Logger, mux: http.NewServeMux()}
	u.ctx, u.cancel = context.WithCancel(context.Background())
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	key := opts.Server.RequireKey
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	u.mux.Handle("/ui/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, protocol.Errorf(http.StatusMethodNotAllowed, protocol.CodeMethodNotAllowed, "", "%s %s is not supported.", r.Method, r.URL.Path))
			return
		}
		// Everything the page loads or calls is its own: no inline script, no other origin.
		w.Header().Set("Content-Security-Policy", pageCSP)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	}))
	u.mux.Handle("GET /ui/api/live", key(http.HandlerFunc(u.live)))
	u.mux.Handle("POST /ui/api/race", key(http.HandlerFunc(u.startRace)))
	u.mux.Handle("GET /ui/api/race", key(http.HandlerFunc(u.getRace)))
	u.mux.Handle("GET /ui/api/race/events", key(http.HandlerFunc(u.events)))
	u.mux.Handle("/ui/api/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, protocol.Errorf(http.StatusNotFound, "not_found", "", "No route %s %s on this server.", r.Method, r.URL.Path))
	}))
	return u
}

// Handler returns a handler that serves the page and its API under Prefix (and redirects
// /ui to it), and passes every other request to next.
func (u *UI) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/ui":
			http.Redirect(w, r, Prefix, http.StatusFound)
		case strings.HasPrefix(r.URL.Path, Prefix):
			u.mux.ServeHTTP(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// Close cancels a running race, ends the event streams and waits for both. Call it before
// the server's Shutdown, so that the race's connections are gone when the server drains.
func (u *UI) Close() {
	u.cancel()
	u.wg.Wait()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *protocol.Error) { protocol.WriteHTTPError(w, e) }

// bearer returns the request's API key ("" when none), which the race's client sends on.
func bearer(r *http.Request) string {
	k, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return k
}
