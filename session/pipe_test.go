package session

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/tetherd/tether/protocol"
)

// pipe is an in-memory Transport; it works inside testing/synctest bubbles, where a real
// socket would not let fake time advance.
type pipe struct {
	in   chan []byte // client → server
	out  chan []byte // server → client
	done chan struct{}

	mu     sync.Mutex // guards code
	code   protocol.CloseCode
	closed bool
}

func newPipe() *pipe {
	return &pipe{in: make(chan []byte, 64), out: make(chan []byte, 4096), done: make(chan struct{})}
}

var errPipeClosed = errors.New("pipe closed")

func (p *pipe) Read(ctx context.Context) ([]byte, error) {
	select {
	case b := <-p.in:
		return b, nil
	case <-p.done:
		return nil, errPipeClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *pipe) Write(ctx context.Context, data []byte) error {
	b := append([]byte(nil), data...)
	select {
	case p.out <- b:
		return nil
	case <-p.done:
		return errPipeClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pipe) Close(code protocol.CloseCode, _ string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		p.code = code
		close(p.done)
	}
	return nil
}

func (p *pipe) closeCode() protocol.CloseCode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code
}

// send writes a client frame.
func (p *pipe) send(t *testing.T, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p.in <- b
}

// next returns the next server frame, decoded.
func (p *pipe) next(t *testing.T) map[string]any {
	t.Helper()
	b := <-p.out
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("bad frame %q", b)
	}
	return m
}

// until returns the server frames up to and including the first of type typ.
func (p *pipe) until(t *testing.T, typ protocol.EventType) []map[string]any {
	t.Helper()
	var fs []map[string]any
	for {
		f := p.next(t)
		fs = append(fs, f)
		if f["type"] == string(typ) {
			return fs
		}
		if f["type"] == "error" {
			t.Fatalf("unexpected error frame waiting for %s: %v", typ, f)
		}
	}
}

// pipeAborted is the close reason a pipe records for Abort.
const pipeAborted protocol.CloseCode = 1006

func (p *pipe) Abort() error { return p.Close(pipeAborted, "") }
