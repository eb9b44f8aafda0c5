package session

import (
	"bytes"
	"compress/flate"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tetherd/tether/protocol"
)

// compactionKey signs compaction items: random per process, so an item round-trips through any
// connection or request of this server process (not across restarts or instances).
var compactionKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}()

// compactionSummary is the Codex CLI's older name of the compaction item type.
const compactionSummary = "compaction_summary"

// compactionPrefix starts every encrypted_content Tether issues (format version 1).
const compactionPrefix = "tcmp1."

// maxCompactedBytes bounds the decompressed window of one compaction item (64 MiB).
const maxCompactedBytes = 64 << 20

// NewCompaction returns a compaction item that stands for items (the whole window, in order):
// its encrypted_content is "tcmp1." + base64url(deflate(JSON items)) + "." + base64url(HMAC-SHA256
// of that text under a per-process key). ExpandCompactions turns it back into items.
func NewCompaction(items []protocol.Item) protocol.Item {
	raw, _ := json.Marshal(items)
	var buf bytes.Buffer
	zw, _ := flate.NewWriter(&buf, flate.BestSpeed)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	body := compactionPrefix + base64.RawURLEncoding.EncodeToString(buf.Bytes())
	content := body + "." + base64.RawURLEncoding.EncodeToString(sign(body))
	id := protocol.NewID("cmp")
	item, _ := json.Marshal(map[string]string{"id": id, "type": protocol.ItemCompaction, "encrypted_content": content})
	return protocol.Item{Type: protocol.ItemCompaction, ID: id, Raw: item}
}

func sign(body string) []byte {
	m := hmac.New(sha256.New, compactionKey)
	m.Write([]byte(body))
	return m.Sum(nil)
}

// ExpandCompactions returns input with every compaction item (type "compaction", or Codex's
// older "compaction_summary") replaced by the items it stands
// for. A compaction item this server did not issue, or whose content was altered, is
// invalid_compaction_item (400, param "input[i]"). input is returned as is when it holds none.
func ExpandCompactions(input []protocol.Item) ([]protocol.Item, error) {
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
		items, err := openCompaction(input[i].Raw)
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

// openCompaction checks and decodes a compaction item's encrypted_content.
func openCompaction(raw json.RawMessage) ([]protocol.Item, error) {
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
	if !ok || !strings.HasPrefix(body, compactionPrefix) || err != nil || !hmac.Equal(got, sign(body)) {
		return nil, fmt.Errorf("this server did not issue it, or it was altered")
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
