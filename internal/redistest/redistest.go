package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	s := &Server{t: t, bin: bin, port: port}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is the redis:// URL of database 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Restart starts the server (again) on its port, with an empty dataset, and waits until it
// accepts connections.
func (s *Server) Restart() {
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
	s.cmd = cmd
	s.done = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := ping(s.Addr()); err == nil {
			return
		} else if time.Now().After(deadline) {
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

// ping sends PING and expects +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 7)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != "+PONG\r\n" {
		return fmt.Errorf("answer %q", buf[:n])
	}
	return nil
}
