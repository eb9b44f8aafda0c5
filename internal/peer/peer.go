// Package peer holds the client-side frame helpers shared by Tether's own load tools
// (internal/bench, internal/soak). It imports nothing of the server.
package peer

import (
	"bytes"
	"encoding/json"
)

// EventType returns the "type" of a server event. Tether writes it first, so the common case
// reads the prefix; other servers may not, so it falls back to decoding.
func EventType(data []byte) string {
	const pfx = `{"type":"`
	if bytes.HasPrefix(data, []byte(pfx)) {
		rest := data[len(pfx):]
		if i := bytes.IndexByte(rest, '"'); i >= 0 && bytes.IndexByte(rest[:i], '\\') < 0 {
			return string(rest[:i])
		}
	}
	var v struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(data, &v)
	return v.Type
}

// IsTerminal reports whether typ ends a Response: response.completed, response.incomplete or
// response.failed.
func IsTerminal(typ string) bool {
	return typ == "response.completed" || typ == "response.incomplete" || typ == "response.failed"
}
