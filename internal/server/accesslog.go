package server

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tetherd/tether/protocol"
)

// serveLogged authenticates r before routing (with keys configured, every path but /healthz
// and /metrics, which metricsRoute checks, needs a key, so an unknown route or method answers 401, not 404), serves it, counts an
// error answer in tether_errors_total and writes the access log line. A request whose client
// went away before anything was answered is recorded as status 499, code
// client_closed_request (protocol.ClientClosed), whether its handler wrote that error or
// wrote nothing.
func (s *Server) serveLogged(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w}
	keyID, ok := "", true
	switch r.URL.Path {
	case "/healthz":
	case "/metrics": // metricsRoute tells a metrics key from an API key
		if _, isMetrics := s.opts.MetricsKeys.owner(r); s.opts.MetricsKeys.Open() || !isMetrics {
			keyID, _ = s.opts.Keys.owner(r)
		}
	default:
		keyID, ok = s.opts.Keys.owner(r)
	}
	if ok {
		s.guard(rec, r)
	} else {
		unauthorized(rec, r)
	}
	code := rec.errorCode()
	if rec.code == 0 && r.Context().Err() != nil {
		// Nothing was answered and the client has gone (its connection closed while the
		// request waited or worked): recorded as nginx records it, never sent.
		rec.code, code = protocol.StatusClientClosed, protocol.CodeClientClosed
	}
	if code != "" {
		s.httpErrors.add(code)
	}
	s.logAccess(r, rec, code, keyID, time.Since(start))
}

// logAccess writes one line per HTTP request, and per WebSocket connection when it closes
// (status 101, duration = the connection's life): method, path, status, error code of a
// rejected request, duration, body bytes written (not counting WebSocket frames), key id (a
// hash prefix, never the key) and remote address. /healthz answers that are 200 log at debug
// level (load balancers poll it).
func (s *Server) logAccess(r *http.Request, rec *recorder, code, keyID string, d time.Duration) {
	level := slog.LevelInfo
	if r.URL.Path == "/healthz" && rec.status() == http.StatusOK {
		level = slog.LevelDebug
	}
	if !s.log.Enabled(r.Context(), level) {
		return
	}
	attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", rec.status()), slog.Duration("duration", d), slog.Int64("bytes", rec.bytes)}
	if code != "" {
		attrs = append(attrs, slog.String("code", code))
	}
	if keyID != "" {
		attrs = append(attrs, slog.String("key_id", keyID))
	}
	attrs = append(attrs, slog.String("remote", r.RemoteAddr))
	s.log.LogAttrs(r.Context(), level, "access", attrs...)
}

// errBodyMax bounds the captured body of an error answer (error bodies are short).
const errBodyMax = 4 << 10

// recorder is the ResponseWriter of one request: it records the status, the body bytes and the
// start of an error body. Unwrap lets http.ResponseController (flush, write deadlines) and the
// WebSocket hijack reach the connection's own writer.
type recorder struct {
	http.ResponseWriter
	code    int
	bytes   int64
	errBody []byte
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 || r.code < 200 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	if r.code >= 400 && len(r.errBody) < errBodyMax {
		r.errBody = append(r.errBody, b[:min(len(b), errBodyMax-len(r.errBody))]...)
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Unwrap returns the underlying ResponseWriter.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

// errorCode is the error.code of an error answer ({"error":{"code":…}}), its type when it has
// no code, or "http_<status>" when the body is not an error object; "" below 400.
func (r *recorder) errorCode() string {
	if r.status() < 400 {
		return ""
	}
	var body struct {
		Error struct {
			Code *string `json:"code"`
			Type string  `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(r.errBody, &body) == nil {
		if body.Error.Code != nil && *body.Error.Code != "" {
			return *body.Error.Code
		}
		if body.Error.Type != "" {
			return body.Error.Type
		}
	}
	return "http_" + strconv.Itoa(r.status())
}

// codeCounts counts HTTP error answers by code (for tether_errors_total).
type codeCounts struct {
	mu sync.Mutex
	n  map[string]int64
}

func (c *codeCounts) add(code string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = make(map[string]int64)
	}
	c.n[code]++
}

func (c *codeCounts) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}
