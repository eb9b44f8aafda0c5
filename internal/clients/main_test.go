package clients_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/skipnote"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(skipnote.M(m, "internal/clients")) }

// Environment variables that locate the npm clients (see .ci/install-clients).
const (
	envNodeClients    = "TETHER_NODE_CLIENTS"    // a folder holding node_modules
	envRequireClients = "TETHER_REQUIRE_CLIENTS" // "1": a missing client fails instead of skipping
	defaultClients    = "/tmp/tether-clients"    // where .ci/run installs them; used when the variable is unset
	installHint       = ".ci/install-clients " + defaultClients
)

// nodeClients returns the folder holding node_modules with every one of paths (relative to
// node_modules) in it. When the folder or a path is missing the test skips loudly, or fails
// when TETHER_REQUIRE_CLIENTS=1.
func nodeClients(t *testing.T, paths ...string) string {
	t.Helper()
	dir := os.Getenv(envNodeClients)
	if _, err := os.Stat(filepath.Join(defaultClients, "node_modules")); dir == "" && err == nil {
		dir = defaultClients
	}
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv(envRequireClients) == "1" {
			t.Fatalf("%s, and %s=1 requires it. Install the clients with: %s", msg, envRequireClients, installHint)
		}
		skipnote.Skip(t, fmt.Sprintf("Node clients: %s (install them with: %s)", msg, installHint))
	}
	if dir == "" {
		missing("%s is not set and %s has no node_modules", envNodeClients, defaultClients)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join(abs, "node_modules", p)); err != nil {
			missing("%s=%s lacks node_modules/%s", envNodeClients, dir, p)
		}
	}
	return abs
}

// fixture is Tether's server on a loopback httptest server, with a count of the requests that
// reach /v1/responses and a tap on every connection's bytes.
type fixture struct {
	srv  *server.Server
	url  string // http://127.0.0.1:PORT
	base string // http://127.0.0.1:PORT/v1
	tap  *tap

	posts, upgrades atomic.Int64 // POST /v1/responses, GET /v1/responses with an upgrade
	mu              sync.Mutex
	requests        []string // "METHOD path [upgrade]" in arrival order
}

type fixtureOptions struct {
	server   server.Options
	logLevel slog.Level
}

func newFixture(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	if o.server.Logger == nil {
		o.server.Logger = slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: o.logLevel}))
	}
	f := &fixture{srv: server.New(o.server)}
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		line := r.Method + " " + r.URL.Path
		if r.URL.Path == "/v1/responses" {
			switch {
			case r.Method == http.MethodPost:
				f.posts.Add(1)
			case strings.EqualFold(r.Header.Get("Upgrade"), "websocket"):
				f.upgrades.Add(1)
				line += " [upgrade]"
			}
		}
		f.mu.Lock()
		f.requests = append(f.requests, line)
		f.mu.Unlock()
		f.srv.ServeHTTP(w, r)
	}))
	f.tap = &tap{Listener: hs.Listener}
	hs.Listener = f.tap
	hs.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = f.srv.Shutdown(ctx)
		hs.Close()
	})
	f.url = hs.URL
	f.base = hs.URL + "/v1"
	return f
}

func (f *fixture) requestLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Logf("server: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// tap records the bytes of every accepted connection in both directions, so that a failing
// test can show the WebSocket frames a client exchanged with the server.
type tap struct {
	net.Listener
	mu    sync.Mutex
	conns []*tapConn
	seq   atomic.Int64 // orders the chunks of all connections
}

func (l *tap) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	tc := &tapConn{Conn: c, seq: &l.seq}
	l.mu.Lock()
	l.conns = append(l.conns, tc)
	l.mu.Unlock()
	return tc, nil
}

type tapConn struct {
	net.Conn
	seq     *atomic.Int64
	mu      sync.Mutex
	in, out stream // client → server, server → client
}

// stream is the bytes of one direction, with the sequence number of each chunk.
type stream struct {
	buf   bytes.Buffer
	marks []mark
}

type mark struct {
	off int
	seq int64
}

func (s *stream) add(p []byte, seq int64) {
	if len(p) > 0 {
		s.marks = append(s.marks, mark{s.buf.Len(), seq})
		s.buf.Write(p)
	}
}

// seqAt is the sequence number of the chunk holding byte off.
func (s *stream) seqAt(off int) int64 {
	i := sort.Search(len(s.marks), func(i int) bool { return s.marks[i].off > off })
	if i == 0 {
		return 0
	}
	return s.marks[i-1].seq
}

func (c *tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.in.add(p[:n], c.seq.Add(1))
	c.mu.Unlock()
	return n, err
}

func (c *tapConn) Write(p []byte) (int, error) {
	c.mu.Lock() // before the write, so that a reply is never ordered before its cause
	c.out.add(p, c.seq.Add(1))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// frame is one WebSocket frame seen on a tapped connection.
type frame struct {
	seq      int64
	Conn     int
	ToServer bool
	Opcode   byte
	Payload  []byte
}

func (fr frame) String() string {
	dir := "server→client"
	if fr.ToServer {
		dir = "client→server"
	}
	var p string
	switch fr.Opcode {
	case 1:
		p = string(fr.Payload)
	case 8:
		if len(fr.Payload) >= 2 {
			p = fmt.Sprintf("close %d %q", binary.BigEndian.Uint16(fr.Payload), fr.Payload[2:])
		} else {
			p = "close"
		}
	default:
		p = fmt.Sprintf("opcode %d, %d bytes", fr.Opcode, len(fr.Payload))
	}
	return fmt.Sprintf("conn %d %s: %s", fr.Conn, dir, p)
}

// Frames parses the WebSocket frames of every tapped connection that upgraded (the server
// disables compression, so payloads are plain), in the order they were read or written.
// Continuation frames are not merged.
func (l *tap) Frames() []frame {
	l.mu.Lock()
	conns := append([]*tapConn(nil), l.conns...)
	l.mu.Unlock()
	var frames []frame
	for i, c := range conns {
		c.mu.Lock()
		if bytes.HasPrefix(c.out.buf.Bytes(), []byte("HTTP/1.1 101")) {
			frames = append(frames, parseFrames(i, true, &c.in)...)
			frames = append(frames, parseFrames(i, false, &c.out)...)
		}
		c.mu.Unlock()
	}
	sort.SliceStable(frames, func(i, j int) bool { return frames[i].seq < frames[j].seq })
	return frames
}

func parseFrames(conn int, toServer bool, s *stream) []frame {
	all := s.buf.Bytes()
	head := bytes.Index(all, []byte("\r\n\r\n"))
	if head < 0 {
		return nil
	}
	b := all[head+4:]
	var frames []frame
	for len(b) >= 2 {
		seq := s.seqAt(len(all) - len(b))
		op, masked, n := b[0]&0x0f, b[1]&0x80 != 0, uint64(b[1]&0x7f)
		b = b[2:]
		switch n {
		case 126:
			if len(b) < 2 {
				return frames
			}
			n, b = uint64(binary.BigEndian.Uint16(b)), b[2:]
		case 127:
			if len(b) < 8 {
				return frames
			}
			n, b = binary.BigEndian.Uint64(b), b[8:]
		}
		var key []byte
		if masked {
			if len(b) < 4 {
				return frames
			}
			key, b = b[:4], b[4:]
		}
		if uint64(len(b)) < n {
			return frames
		}
		p := bytes.Clone(b[:n])
		b = b[n:]
		for i := range p {
			if key != nil {
				p[i] ^= key[i%4]
			}
		}
		frames = append(frames, frame{seq: seq, Conn: conn, ToServer: toServer, Opcode: op, Payload: p})
	}
	return frames
}

// logFrames writes every tapped frame to the test log, each cut to max bytes.
func (f *fixture) logFrames(t *testing.T, max int) {
	t.Helper()
	for _, r := range f.requestLog() {
		t.Logf("request: %s", r)
	}
	for _, fr := range f.tap.Frames() {
		s := fr.String()
		if len(s) > max {
			s = s[:max] + fmt.Sprintf("… (%d bytes)", len(s))
		}
		t.Log(s)
	}
}
