package attack

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ProbeEnv names the environment variable that makes a process started by Run the /healthz
// prober of one attack: its value is the server's base URL ("http://127.0.0.1:PORT"). A
// binary that runs attacks (tether, a test binary) calls RunProbe when it is set, before
// anything else.
//
// The prober is a process of its own so that the latency it reports is the server's, as an
// outside health checker sees it. Probing from inside the attacking process measured the
// attacker too: its own garbage collections and goroutines building 32 MiB bodies delayed the
// probe by 100–200 ms while the server answered in a few.
const ProbeEnv = "TETHER_ATTACK_PROBE"

// probeInterval is the pause between two probes: often enough that an attack of a few
// seconds gets a few hundred probes, so that their p99 is not simply the slowest one.
const probeInterval = 25 * time.Millisecond

// RunProbe asks GET base/healthz every 25 ms on a new connection until stop is closed or
// at EOF (the parent closes the pipe), and writes one line per probe to out:
// "ok NANOSECONDS" for a 200, "fail REASON" otherwise. It returns the process's exit code.
func RunProbe(base string, stop io.Reader, out io.Writer) int {
	ended := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stop)
		close(ended)
	}()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	w := bufio.NewWriter(out)
	for {
		start := time.Now()
		line := probeOnce(client, base)
		if line == "" {
			line = "ok " + strconv.FormatInt(int64(time.Since(start)), 10)
		}
		if _, err := fmt.Fprintln(w, line); err != nil || w.Flush() != nil {
			return 1
		}
		select {
		case <-ended:
			return 0
		case <-time.After(probeInterval):
		}
	}
}

// probeOnce asks for /healthz once and returns "" for a 200, else "fail REASON".
func probeOnce(client *http.Client, base string) string {
	resp, err := client.Get(base + "/healthz")
	if err != nil {
		return "fail " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "fail status " + strconv.Itoa(resp.StatusCode)
	}
	return ""
}

// probe is the running prober child of one attack and what it has reported.
type probe struct {
	cmd    *exec.Cmd
	stopw  io.WriteCloser
	done   chan struct{}
	lat    []time.Duration
	failed int
}

// startProbe starts this binary as the prober of base (see ProbeEnv).
func startProbe(base string) (*probe, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("attack: the /healthz prober: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), ProbeEnv+"="+base)
	cmd.Stderr = os.Stderr
	stopw, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	lines, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("attack: start the /healthz prober: %w", err)
	}
	p := &probe{cmd: cmd, stopw: stopw, done: make(chan struct{})}
	go p.read(lines)
	return p, nil
}

// read gathers the prober's lines until it exits.
func (p *probe) read(lines io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(lines)
	for sc.Scan() {
		kind, v, _ := strings.Cut(sc.Text(), " ")
		ns, err := strconv.ParseInt(v, 10, 64)
		if kind == "ok" && err == nil {
			p.lat = append(p.lat, time.Duration(ns))
		} else {
			p.failed++
		}
	}
}

// stop ends the prober and returns the latencies of its successful probes and the number
// that failed. A prober that does not end within 10 s is killed.
func (p *probe) stop() ([]time.Duration, int) {
	p.stopw.Close()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = p.cmd.Wait()
	return p.lat, p.failed
}
