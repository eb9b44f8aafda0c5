package wsguard_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/tetherd/tether/internal/wsguard"
	"github.com/tetherd/tether/internal/wstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rawServer serves out on a real socket, then ends the stream.
func rawServer(t *testing.T, out []byte) string {
	return wstest.RawServer(t, nil, func(c net.Conn, _ *bufio.Reader) { _, _ = c.Write(out) })
}

var frame = wstest.ServerFrame

// readAll dials url (guarded or not) and reads messages until an error.
func readAll(t *testing.T, url string, guarded bool) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	opts := &websocket.DialOptions{}
	if guarded {
		opts.HTTPClient = wsguard.Client(nil)
	}
	ws, _, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(-1)
	var msgs []string
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, string(data))
	}
}

var whole = frame(true, 1, []byte(`{"type":"response.created"}`))

// cutCases are streams that end inside a message, after one whole message.
var cutCases = []struct {
	name string
	out  []byte
	lib  string // what the library alone delivers in place of the cut message
}{
	// The server's write timed out after the header of the next frame reached the socket.
	{"after a frame header", append(bytes.Clone(whole), 0x81, 100), ""},
	// The library reads payloads in the caller's chunks: 512 bytes, then the rest; the stream
	// ends at that boundary.
	{"at a payload chunk boundary", append(bytes.Clone(whole), frame(true, 1, bytes.Repeat([]byte("x"), 1000))[:4+512]...), strings.Repeat("x", 512)},
	{"between fragments", append(bytes.Clone(whole), frame(false, 1, []byte(`{"type":`))...), `{"type":`},
}

// TestLibraryDeliversCutMessages shows the cause at the pinned library version, on a real
// socket: a message cut off by the end of the connection comes back whole-looking with a nil
// error. When this fails, the library reports these itself.
func TestLibraryDeliversCutMessages(t *testing.T) {
	for _, c := range cutCases {
		msgs, err := readAll(t, rawServer(t, c.out), false)
		if len(msgs) != 2 || msgs[1] != c.lib {
			t.Errorf("%s: the library returned %q, then %v", c.name, msgs, err)
		}
	}
}

// TestCutMessageIsAnError: through Client, the same streams end with ErrCutOff after the
// whole message, and the cut one is never delivered.
func TestCutMessageIsAnError(t *testing.T) {
	for _, c := range cutCases {
		msgs, err := readAll(t, rawServer(t, c.out), true)
		if len(msgs) != 1 || msgs[0] != string(whole[2:]) || !errors.Is(err, wsguard.ErrCutOff) {
			t.Errorf("%s: got %q, then %v; want the whole message, then ErrCutOff", c.name, msgs, err)
		}
	}
}

// TestWholeMessagesPass: messages of every length form (7-bit, 16-bit, 64-bit), an empty one,
// a fragmented one with a ping between its fragments arrive intact, and an end of stream
// between messages is not a cut.
func TestWholeMessagesPass(t *testing.T) {
	big := bytes.Repeat([]byte("y"), 70000)
	var out []byte
	out = append(out, whole...)
	out = append(out, frame(true, 1, bytes.Repeat([]byte("z"), 300))...)
	out = append(out, frame(true, 2, big)...)
	out = append(out, frame(true, 1, nil)...)
	out = append(out, frame(false, 1, []byte("ab"))...)
	out = append(out, frame(true, 9, []byte("ping"))...)
	out = append(out, frame(false, 0, []byte("cd"))...)
	out = append(out, frame(true, 0, []byte("ef"))...)
	msgs, err := readAll(t, rawServer(t, out), true)
	want := []string{string(whole[2:]), strings.Repeat("z", 300), string(big), "", "abcdef"}
	if strings.Join(msgs, "|") != strings.Join(want, "|") {
		t.Fatalf("messages: %d, want %d (%.80q)", len(msgs), len(want), msgs)
	}
	if err == nil || errors.Is(err, wsguard.ErrCutOff) {
		t.Fatalf("end between messages: %v, want a plain end of stream", err)
	}
}

// TestClientKeepsOptions: Client copies the client and wraps its transport once.
func TestClientKeepsOptions(t *testing.T) {
	hc := &http.Client{Timeout: time.Minute}
	g := wsguard.Client(hc)
	if g == hc || g.Timeout != time.Minute || hc.Transport != nil {
		t.Fatalf("Client changed its argument or lost its settings: %+v", g)
	}
	if gg := wsguard.Client(g); gg.Transport != g.Transport {
		t.Fatal("a guarded client was wrapped twice")
	}
}
