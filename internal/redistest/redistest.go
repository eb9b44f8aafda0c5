package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/skipnote"
)

// Server is a redis-server process owned by a test.
type Server struct {
	t    testing.TB
	bin  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts a redis-server for t (a test or a benchmark) and stops it in t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := os.Getenv("TETHER_REDIS_SERVER")
	if bin == "" {
		bin, _ = exec.LookPath("redis-server")
	}
	if bin == "" {
		if os.Getenv("TETHER_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server not found (TETHER_REQUIRE_REDIS=1): install the Debian package redis-server or set TETHER_REDIS_SERVER")
		}
		skipnote.Skip(t, "redis-server not found (install the Debian package redis-server or set TETHER_REDIS_SERVER)")
	}
	s := &Server{t: t, bin: bin}
	// The port is one that was free a moment ago: another process may take it before
	// redis-server binds it. Then redis-server exits at once and a new port is tried.
	for attempt := 1; ; attempt++ {
		s.port = freePort(t)
		if s.start() {
			break
		}
		if attempt == 5 {
			t.Fatalf("redistest: redis-server exited at start on 5 ports in a row (last %s)", s.Addr())
		}
	}
	t.Cleanup(s.Stop)
	return s
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is the redis:// URL of database 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Restart starts the server (again) on its port, with an empty dataset, and waits until it
// accepts connections. It fails the test if the server exits instead (its port was taken
// meanwhile).
func (s *Server) Restart() {
	s.t.Helper()
	if !s.start() {
		s.t.Fatalf("redistest: redis-server exited at restart on %s (its port was taken meanwhile?)", s.Addr())
	}
}

// start starts the server on s.port and waits until it answers there; false if it exited
// first (its port was taken). It waits for this process's own answer: a PING could be
// answered by another redis-server that holds the port.
func (s *Server) start() bool {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatal("redistest: Restart while running")
	}
	cmd := exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("redistest: start %s: %v", s.bin, err)
	}
	done := make(chan struct{})
	s.cmd, s.done = cmd, done
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	for deadline := time.Now().Add(30 * time.Second); ; {
		pid, err := serverPID(s.Addr())
		if err == nil && pid == cmd.Process.Pid {
			return true
		}
		if err == nil {
			err = fmt.Errorf("answered by process %d, not %d", pid, cmd.Process.Pid)
		}
		select {
		case <-done:
			s.cmd = nil
			return false
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			s.t.Fatalf("redistest: redis-server on %s did not start: %v", s.Addr(), err)
		}
	}
}

// Stop kills the server (SIGKILL: Redis is lost, as in a crash) and waits for it. Idempotent.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// serverPID asks the server on addr for INFO server and returns its process_id.
func serverPID(addr string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("INFO server\r\n")); err != nil {
		return 0, err
	}
	// The answer is a bulk string: $<length>\r\n<lines>\r\n.
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(head, "$") {
		return 0, fmt.Errorf("answer %q", head)
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil {
		return 0, fmt.Errorf("answer %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("no process_id in INFO server")
}
