package server

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// HTTPServer returns the http.Server that serves s on ln, with the connection limits of
// Options: request headers within DefaultHeaderTimeout, keep-alive connections closed after
// IdleTimeout, and ln wrapped in the MaxHTTPConnections bound. Serve the returned listener:
//
//	hs, l := s.HTTPServer(ln)
//	go hs.Serve(l)
func (s *Server) HTTPServer(ln net.Listener) (*http.Server, net.Listener) {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: DefaultHeaderTimeout,
		IdleTimeout:       positive(s.opts.IdleTimeout, DefaultIdleTimeout),
		ConnContext:       withConn,
	}
	if hs.IdleTimeout == 0 {
		hs.IdleTimeout = -1 // net/http: a zero IdleTimeout would fall back to ReadTimeout
	}
	max := s.opts.MaxHTTPConnections
	if max == 0 {
		max = DefaultMaxHTTPConnections
	}
	if max < 0 {
		return hs, ln
	}
	l := newLimitListener(ln, max)
	hs.ConnState = l.connState
	return hs, l
}

// positive returns d, def when d is 0, and 0 (none) when d is negative.
func positive(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// guard serves one request: its connection is no longer idle (the HTTP connection bound does
// not close it while it is served); a connection of the healthz reserve serves only /healthz; every
// answer that is not a WebSocket gets a write deadline (WriteTimeout from each write, so that
// a long stream whose client reads lives on, and one whose client stops reading is cut);
// rejections are logged and counted by the access log around it (serveLogged).
func (s *Server) guard(w http.ResponseWriter, r *http.Request) {
	if serveConn(r) {
		w.Header().Set("Connection", "close")
		if r.URL.Path != "/healthz" {
			s.fail(w, &protocol.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeServer,
				Code: protocol.CodeTooManyConnections, Message: "The server holds its maximum of HTTP connections: try again later."})
			return
		}
	}
	dw := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: s.writeTimeout()}
	if isUpgrade(r) {
		_ = dw.rc.SetWriteDeadline(time.Time{}) // left by an earlier answer on this connection
		dw.timeout = 0                          // a WebSocket times its own writes
	}
	s.mux.ServeHTTP(dw, r) // the access log (serveLogged) logs and counts rejections
}

func (s *Server) writeTimeout() time.Duration {
	return positive(s.opts.WriteTimeout, session.DefaultWriteTimeout)
}

// deadlineWriter sets the connection's write deadline when the answer starts and renews it at
// each write, so that a client that does not read cannot hold the handler (and what it holds)
// for ever, while a long stream (SSE of /v1/responses or /v1/chat/completions) that its
// client reads is never cut. It records the status for the log.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	status  int
}

func (d *deadlineWriter) WriteHeader(status int) {
	if d.status == 0 {
		d.status = status
		if d.timeout > 0 {
			_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
		}
	}
	d.ResponseWriter.WriteHeader(status)
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	if d.status == 0 {
		d.WriteHeader(http.StatusOK)
	} else if d.timeout > 0 {
		_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	}
	return d.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController and the WebSocket upgrade reach the connection.
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// newBudget returns the server-wide Budget of Options.MaxMemory and MaxDecoding.
func newBudget(maxMemory int64, maxDecoding int) *session.Budget {
	if maxMemory == 0 {
		maxMemory = DefaultMaxMemory()
	}
	if maxDecoding == 0 {
		maxDecoding = DefaultMaxDecoding
	}
	return session.NewBudget(maxMemory, maxDecoding)
}

// DefaultMaxMemory is the default of Options.MaxMemory: an eighth of the memory available to
// the process (the smaller of MemTotal in /proc/meminfo and the cgroup v2 memory.max), or
// 1 GiB where neither can be read. The budget counts estimates (item text, frame bytes), and
// the process's resident memory runs to a few times what it counts (token buffers, the
// garbage collector's headroom), hence the small fraction.
func DefaultMaxMemory() int64 {
	total := min(memInfoTotal(), cgroupMax())
	if total <= 0 || total == 1<<62 {
		return 1 << 30
	}
	return max(total/8, 256<<20)
}

// memInfoTotal reads MemTotal from /proc/meminfo, in bytes (1<<62 when unknown).
func memInfoTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 1 << 62
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil && kb > 0 {
				return kb << 10
			}
		}
	}
	return 1 << 62
}

// cgroupMax reads the cgroup v2 memory limit, in bytes (1<<62 when none or unknown).
func cgroupMax() int64 {
	b, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 1 << 62
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return 1 << 62
	}
	return n
}

// Budget is the server-wide memory budget of frames and bodies being read and decoded.
func (s *Server) Budget() *session.Budget { return s.budget }
