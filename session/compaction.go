package session

import (
	"bytes"
	"compress/flate"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/tetherd/tether/protocol"
)

// processKey signs compaction items under a nil *Compactor: random per process, so an item
// round-trips through any connection or request of this server process (not across restarts or
// instances).
var processKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}()

// MinCompactionKey is the shortest compaction key NewCompactor accepts, in bytes.
const MinCompactionKey = 32

// Compactor issues and opens compaction items under its keys: the first signs, every one
// verifies (so a key can be rotated: put the new one first, keep the old one until the items it
// signed are no longer sent). A nil *Compactor uses a random per-process key. A Compactor is
// immutable and safe for concurrent use.
type Compactor struct {
	keys [][]byte
}

// NewCompactor returns a Compactor with keys (the first signs, all verify). It is an error
// when keys is empty or a key is shorter than MinCompactionKey bytes.
func NewCompactor(keys ...[]byte) (*Compactor, error) {
	if len(keys) == 0 {
		return nil, errors.New("no compaction key")
	}
	c := &Compactor{}
	for i, k := range keys {
		if len(k) < MinCompactionKey {
			return nil, fmt.Errorf("compaction key %d is %d bytes, shorter than %d", i+1, len(k), MinCompactionKey)
		}
		c.keys = append(c.keys, bytes.Clone(k))
	}
	return c, nil
}

// ReadCompactor reads a compaction key file: a text file with one key per line (a trailing
// "\r" is dropped, blank lines are skipped), the first signs, all verify; each key is at least
// MinCompactionKey bytes (for instance the 64 characters of `openssl rand -hex 32`). An
// unreadable file, or one without a key or with a short key, is an error.
func ReadCompactor(path string) (*Compactor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys [][]byte
	for line := range strings.Lines(string(data)) {
		line = strings.TrimRight(line, "\r\n")
		if line != "" {
			keys = append(keys, []byte(line))
		}
	}
	c, err := NewCompactor(keys...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func (c *Compactor) signingKeys() [][]byte {
	if c == nil {
		return [][]byte{processKey}
	}
	return c.keys
}

// compactionSummary is the Codex CLI's older name of the compaction item type.
const compactionSummary = "compaction_summary"

// compactionPrefix starts every encrypted_content Tether issues (format version 1).
const compactionPrefix = "tcmp1."

// maxCompactedBytes bounds the decompressed window of one compaction item (64 MiB).
const maxCompactedBytes = 64 << 20

// Compact returns a compaction item that stands for items (the whole window, in order): its
// encrypted_content is "tcmp1." + base64url(deflate(JSON items)) + "." + base64url(HMAC-SHA256
// of that text under c's first key). Expand turns it back into items. A window that Expand
// would not take back is refused rather than sealed: rollout_too_large (400, param "input")
// when its JSON is over 64 MiB (what Expand decompresses) or its encrypted_content over
// protocol.MaxTextLength characters (what a create's input holds); encoding stops at the first
// byte past 64 MiB.
func (c *Compactor) Compact(items []protocol.Item) (protocol.Item, error) {
	var buf bytes.Buffer
	zw, _ := flate.NewWriter(&buf, flate.BestSpeed)
	cw := &boundedWriter{w: zw, left: maxCompactedBytes}
	writeItems(cw, items)
	_ = zw.Close()
	if cw.over {
		return protocol.Item{}, compactionTooLarge()
	}
	body := compactionPrefix + base64.RawURLEncoding.EncodeToString(buf.Bytes())
	content := body + "." + base64.RawURLEncoding.EncodeToString(sign(c.signingKeys()[0], body))
	if len(content) > protocol.MaxTextLength { // ASCII: one character a byte
		return protocol.Item{}, protocol.Errorf(http.StatusBadRequest, protocol.CodeRolloutTooLarge, "input",
			"The compaction item of this window would have an encrypted_content of %d characters, over the %d an input item may hold: compact a shorter window.", len(content), protocol.MaxTextLength)
	}
	id := protocol.NewID("cmp")
	item, _ := json.Marshal(map[string]string{"id": id, "type": protocol.ItemCompaction, "encrypted_content": content})
	return protocol.Item{Type: protocol.ItemCompaction, ID: id, Raw: item}, nil
}

// CheckCompactionSize refuses a window that Compact would refuse for its size, without
// encoding it: rollout_too_large (400, param "input") when the texts its JSON must hold (the
// messages' and outputs' text, function call arguments) already pass 64 MiB. A window that
// passes may still be refused by Compact, which counts the JSON itself.
func CheckCompactionSize(items []protocol.Item) error {
	var n int64
	for i := range items {
		it := &items[i]
		n += int64(len(it.Arguments) + len(it.Output))
		for j := range it.Content {
			n += int64(len(it.Content[j].Text))
		}
		for j := range it.OutputParts {
			n += int64(len(it.OutputParts[j].Text))
		}
	}
	if n > maxCompactedBytes {
		return compactionTooLarge()
	}
	return nil
}

// compactionTooLarge is Compact's error for a window over 64 MiB of JSON.
func compactionTooLarge() error {
	return protocol.Errorf(http.StatusBadRequest, protocol.CodeRolloutTooLarge, "input",
		"The compaction window is over %d bytes of JSON, the most a compaction item may stand for: compact a shorter window.", maxCompactedBytes)
}

// boundedWriter passes at most left bytes to w; past them it writes nothing more and sets over.
type boundedWriter struct {
	w    io.Writer
	left int
	over bool
}

func (b *boundedWriter) Write(p []byte) (int, error) {
	if b.over {
		return len(p), nil
	}
	if len(p) > b.left {
		b.over = true
		return len(p), nil
	}
	b.left -= len(p)
	return b.w.Write(p)
}

// writeItems writes items to w as one JSON array of their encodings (Item.AppendJSON), one
// item at a time: a window of a million items is never one buffer of hundreds of MiB (whose
// copies, as it grows, the scheduler cannot preempt).
func writeItems(w io.Writer, items []protocol.Item) {
	b := []byte{'['}
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = items[i].AppendJSON(b)
		if len(b) >= 32<<10 || i == len(items)-1 {
			_, _ = w.Write(b)
			b = b[:0]
		}
	}
	_, _ = w.Write(append(b, ']'))
}

func sign(key []byte, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	return m.Sum(nil)
}

// Expand returns input with every compaction item (type "compaction", or Codex's older
// "compaction_summary") replaced by the items it stands for. A compaction item not signed
// under one of c's keys (issued by a server with another key, or altered) is
// invalid_compaction_item (400, param "input[i]"). input is returned as is when it holds none.
func (c *Compactor) Expand(input []protocol.Item) ([]protocol.Item, error) {
	var out []protocol.Item
	for i := range input {
		if input[i].Type != protocol.ItemCompaction && input[i].Type != compactionSummary {
			if out != nil {
				out = append(out, input[i])
			}
			continue
		}
		if out == nil {
			out = append(make([]protocol.Item, 0, len(input)), input[:i]...)
		}
		items, err := c.open(input[i].Raw)
		if err != nil {
			return nil, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidCompaction, fmt.Sprintf("input[%d]", i),
				"Invalid compaction item: %s. Send the compaction item exactly as POST /v1/responses/compact returned it.", err)
		}
		out = append(out, items...)
	}
	if out == nil {
		return input, nil
	}
	return out, nil
}

// open checks and decodes a compaction item's encrypted_content.
func (c *Compactor) open(raw json.RawMessage) ([]protocol.Item, error) {
	var it struct {
		Content *string `json:"encrypted_content"`
	}
	if err := json.Unmarshal(raw, &it); err != nil || it.Content == nil {
		return nil, fmt.Errorf("encrypted_content is missing")
	}
	body, mac, ok := strings.Cut(*it.Content, ".")
	if ok {
		var rest string
		rest, mac, ok = strings.Cut(mac, ".")
		body = body + "." + rest
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if !ok || !strings.HasPrefix(body, compactionPrefix) || err != nil || !c.verify(got, body) {
		return nil, fmt.Errorf("it was not signed with this server's compaction key, or it was altered")
	}
	packed, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(body, compactionPrefix))
	if err != nil {
		return nil, err
	}
	raw, err = io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(packed)), maxCompactedBytes+1))
	if err != nil || len(raw) > maxCompactedBytes {
		return nil, fmt.Errorf("its window does not decode")
	}
	var items []protocol.Item
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("its window does not decode: %v", err)
	}
	return items, nil
}

// verify reports whether mac is body's HMAC under one of c's keys.
func (c *Compactor) verify(mac []byte, body string) bool {
	for _, k := range c.signingKeys() {
		if hmac.Equal(mac, sign(k, body)) {
			return true
		}
	}
	return false
}
