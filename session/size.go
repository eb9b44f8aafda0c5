package session

import (
	"encoding/json"
	"net"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session/store"
)

// SettingsBytes estimates the memory a rollout holds for the settings of its create, besides
// its items: instructions, tools (names, descriptions, parameter schemas), tool_choice,
// metadata and the text format, in bytes of their JSON text plus a fixed overhead. It is
// counted with ItemsBytes toward Limits.MaxRolloutBytes and the registry's CacheBytes.
func SettingsBytes(p *protocol.CreateParams) int64 {
	var tf json.RawMessage
	if p.Text != nil {
		tf = p.Text.Format
	}
	return settingsBytes(p.Instructions, p.Tools, p.ToolChoice.Raw, tf, p.Metadata)
}

// ResponseBytes estimates the memory held by a Response object (a stored response): its
// output items and its echoed settings (store.ResponseBytes).
func ResponseBytes(r *protocol.Response) int64 { return store.ResponseBytes(r) }

func settingsBytes(instructions *string, tools []protocol.Tool, choice, format json.RawMessage, meta map[string]string) int64 {
	return store.SettingsBytes(instructions, tools, choice, format, meta)
}

// QuotaKey is the key of the per-key quotas of a request: its owner (the API key's hash), or,
// on an open server (owner ""), the client's IP address.
func QuotaKey(owner, remoteAddr string) string {
	if owner != "" {
		return owner
	}
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	return "addr:" + host
}
