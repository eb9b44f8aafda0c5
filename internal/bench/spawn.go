package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTicks is the unit of utime and stime in /proc/<pid>/stat: USER_HZ, which Linux fixes
// at 100 on every architecture Go supports (getconf CLK_TCK).
const clockTicks = 100

// readCPU returns the CPU time (user + system) the process pid has used so far, from
// /proc/<pid>/stat. Its resolution is one clock tick (10ms).
func readCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStat(string(data))
}

// parseStat reads utime and stime (fields 14 and 15) of a /proc/<pid>/stat line. The command
// name (field 2) is in parentheses and may hold spaces, so fields are counted after the last ')'.
func parseStat(s string) (time.Duration, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("bad /proc stat line")
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, errors.New("short /proc stat line")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("bad utime/stime in /proc stat line")
	}
	return time.Duration(utime+stime) * (time.Second / clockTicks), nil
}

// Child is a `tether serve` process the bench started.
type Child struct {
	URL string // http://127.0.0.1:port
	PID int

	cmd    *exec.Cmd
	mu     sync.Mutex
	tail   []string // the last lines of its stderr
	waited chan struct{}
	err    error // from cmd.Wait, once waited is closed
}

// Spawn starts exe with args (the serve subcommand and its flags; the caller passes
// -addr 127.0.0.1:0) and waits until it logs its listen address and /healthz answers. The
// child's log lines are kept (the last few are shown if it fails).
func Spawn(ctx context.Context, exe string, args ...string) (*Child, error) {
	cmd := exec.Command(exe, args...)
	cmd.Stdout = io.Discard
	dieWithParent(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s: %w", exe, err)
	}
	ch := &Child{PID: cmd.Process.Pid, cmd: cmd, waited: make(chan struct{})}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			ch.mu.Lock()
			ch.tail = append(ch.tail, line)
			if len(ch.tail) > 20 {
				ch.tail = ch.tail[1:]
			}
			ch.mu.Unlock()
			if a := listenAddr(line); a != "" {
				select {
				case addrc <- a:
				default:
				}
			}
		}
		ch.err = cmd.Wait()
		close(ch.waited)
	}()
	fail := func(err error) (*Child, error) {
		ch.Stop(time.Second)
		return nil, fmt.Errorf("bench: %s %s: %w%s", exe, strings.Join(args, " "), err, ch.tailText())
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var addr string
	select {
	case addr = <-addrc:
	case <-ch.waited:
		return fail(fmt.Errorf("exited: %v", ch.err))
	case <-wait.Done():
		return fail(errors.New("no listen address logged in time"))
	}
	ch.URL = "http://" + addr
	for {
		req, _ := http.NewRequestWithContext(wait, http.MethodGet, ch.URL+"/healthz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return ch, nil
			}
		}
		select {
		case <-ch.waited:
			return fail(fmt.Errorf("exited: %v", ch.err))
		case <-wait.Done():
			return fail(errors.New("/healthz did not answer in time"))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// listenAddr extracts addr=… from the server's "tether listening" log line.
func listenAddr(line string) string {
	if !strings.Contains(line, "tether listening") {
		return ""
	}
	i := strings.Index(line, " addr=")
	if i < 0 {
		return ""
	}
	a := line[i+len(" addr="):]
	if j := strings.IndexByte(a, ' '); j >= 0 {
		a = a[:j]
	}
	return strings.Trim(a, `"`)
}

func (ch *Child) tailText() string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.tail) == 0 {
		return ""
	}
	return "\n" + strings.Join(ch.tail, "\n")
}

// Stop sends the child SIGTERM, waits up to grace for it to exit, then kills it.
func (ch *Child) Stop(grace time.Duration) error {
	select {
	case <-ch.waited:
		return nil
	default:
	}
	_ = ch.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ch.waited:
		return nil
	case <-time.After(grace):
	}
	_ = ch.cmd.Process.Kill()
	<-ch.waited
	return fmt.Errorf("bench: the server (pid %d) did not stop within %v: killed", ch.PID, grace)
}
