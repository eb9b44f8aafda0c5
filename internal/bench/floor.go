package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/tetherd/tether/internal/wsguard"

	"github.com/coder/websocket"
)

// echoServer is the floor's raw WebSocket peer, in process on loopback: it sends every frame
// back as it came, with no parsing.
type echoServer struct {
	ln  net.Listener
	srv *http.Server
	url string

	wg     sync.WaitGroup // Serve and every handler
	mu     sync.Mutex     // guards closed
	closed bool
}

func startEcho() (*echoServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: floor echo server: %w", err)
	}
	e := &echoServer{ln: ln, url: "ws://" + ln.Addr().String() + "/"}
	e.srv = &http.Server{Handler: http.HandlerFunc(e.handle), ReadHeaderTimeout: 10 * time.Second}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		_ = e.srv.Serve(ln)
	}()
	return e, nil
}

func (e *echoServer) handle(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.wg.Add(1)
	e.mu.Unlock()
	defer e.wg.Done()
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	ctx := r.Context()
	buf := make([]byte, 0, 64<<10)
	for {
		typ, rd, err := c.Reader(ctx)
		if err != nil {
			return
		}
		if buf, err = readAll(buf[:0], rd); err != nil {
			return
		}
		if err := c.Write(ctx, typ, buf); err != nil {
			return
		}
	}
}

func (e *echoServer) close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	_ = e.srv.Close() // hijacked connections end when their client closes (echoClient.close)
	e.wg.Wait()
}

// echoClient is the bench's connection to the echo server.
type echoClient struct {
	c   *websocket.Conn
	buf []byte
}

func (e *echoServer) dial(ctx context.Context) (*echoClient, error) {
	c, _, err := websocket.Dial(ctx, e.url, &websocket.DialOptions{HTTPClient: wsguard.Client(nil), CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil, fmt.Errorf("bench: floor echo: %w", err)
	}
	c.SetReadLimit(-1)
	return &echoClient{c: c, buf: make([]byte, 0, 64<<10)}, nil
}

// echo returns the time from writing frame to having read all of its echo.
func (ec *echoClient) echo(ctx context.Context, frame []byte) (time.Duration, error) {
	t0 := time.Now()
	if err := ec.c.Write(ctx, websocket.MessageText, frame); err != nil {
		return 0, err
	}
	_, rd, err := ec.c.Reader(ctx)
	if err != nil {
		return 0, err
	}
	if ec.buf, err = readAll(ec.buf[:0], rd); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	if len(ec.buf) != len(frame) {
		return 0, fmt.Errorf("echo returned %d bytes, sent %d", len(ec.buf), len(frame))
	}
	return d, nil
}

func (ec *echoClient) close() {
	_ = ec.c.Close(websocket.StatusNormalClosure, "")
}

// readAll appends everything r yields to buf, reusing its capacity.
func readAll(buf []byte, r io.Reader) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
