package deploy

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// instance is one `tether serve` process of the drill, on a fixed loopback port so that it
// comes back behind the same nginx upstream line after a restart.
type instance struct {
	bin, store, logDir string
	debug              bool // -log-level debug
	port               int
	n                  int // starts so far
	cmd                *exec.Cmd
	done               chan struct{}
}

// fixedPort returns a loopback port for an instance that keeps it across restarts. The port is
// free now and below the kernel's ephemeral range (ip_local_port_range), so that no
// connection's local port and no other test's listener on port 0 takes it while the instance
// is down between a stop and its restart.
func fixedPort(t *testing.T) int {
	t.Helper()
	low := ephemeralLow()
	for range 200 {
		port := 10000 + rand.IntN(low-10000)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatalf("no free loopback port between 10000 and %d", low)
	return 0
}

// ephemeralLow returns the lowest port the kernel hands out to connections and to listeners
// on port 0 (32768, Linux's default, when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= 11000 {
		return 32768
	}
	return low
}

func (in *instance) addr() string { return "127.0.0.1:" + strconv.Itoa(in.port) }

// start runs the binary and waits until /healthz answers 200.
func (in *instance) start() error {
	in.n++
	log, err := os.Create(filepath.Join(in.logDir, fmt.Sprintf("tether-%d-%d.log", in.port, in.n)))
	if err != nil {
		return err
	}
	cmd := exec.Command(in.bin, "serve", "-addr", in.addr(), "-store", in.store, "-shutdown-grace", "1s", "-model-speed", "65",
		"-log-format", "json", "-log-level", in.logLevel())
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	in.cmd, in.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(in.done)
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + in.addr() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-in.done:
			return fmt.Errorf("tether on %s exited at start (log in %s)", in.addr(), in.logDir)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tether on %s not healthy: %v", in.addr(), err)
		}
	}
}

// stop sends sig and waits for the process to exit. After SIGTERM it checks that /healthz
// fails (503 while draining, or refused once the listener closed) before the exit.
func (in *instance) stop(sig syscall.Signal) error {
	if in.cmd == nil {
		return nil
	}
	if err := in.cmd.Process.Signal(sig); err != nil {
		return err
	}
	if sig == syscall.SIGTERM {
		if err := in.waitUnhealthy(); err != nil {
			return err
		}
	}
	select {
	case <-in.done:
	case <-time.After(30 * time.Second):
		_ = in.cmd.Process.Kill()
		<-in.done
		return fmt.Errorf("tether on %s did not exit 30s after %v", in.addr(), sig)
	}
	if sig == syscall.SIGTERM && in.cmd.ProcessState.ExitCode() != 0 {
		return fmt.Errorf("tether on %s exited %d after SIGTERM", in.addr(), in.cmd.ProcessState.ExitCode())
	}
	in.cmd = nil
	return nil
}

// kill ends the process at test end.
func (in *instance) kill() {
	if in.cmd != nil {
		_ = in.cmd.Process.Kill()
		<-in.done
		in.cmd = nil
	}
}

// buildTether builds cmd/tether into a temporary directory.
func buildTether(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tether")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/tether").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// waitUnhealthy waits until /healthz no longer answers 200: 503 while the instance drains,
// or a refused connection once its listener closed.
func (in *instance) waitUnhealthy() error {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		resp, err := http.Get("http://" + in.addr() + "/healthz")
		if err != nil {
			return nil
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusServiceUnavailable:
			return nil
		case http.StatusOK:
		default:
			return fmt.Errorf("/healthz of %s after SIGTERM: %d, want 503", in.addr(), resp.StatusCode)
		}
	}
	return fmt.Errorf("/healthz of %s still 200 5s after SIGTERM", in.addr())
}

// logLevel is the instances' -log-level: debug when the drill keeps their logs
// (TETHER_DRILL_LOGS), warn otherwise.
func (in *instance) logLevel() string {
	if in.debug {
		return "debug"
	}
	return "warn"
}
