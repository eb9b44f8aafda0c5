package server

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/tetherd/tether/protocol"
)

// Keys is a set of API keys. A request authenticates with "Authorization: Bearer <key>".
// The zero Keys (none configured) lets every request in.
type Keys struct {
	hashes [][32]byte
}

// LoadKeys reads API keys from a file: one key per line; blank lines and lines starting with
// '#' are ignored. It returns an error if the file cannot be read or holds no key.
func LoadKeys(path string) (*Keys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("api keys: %w", err)
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			keys = append(keys, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("api keys: %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("api keys: %s holds no key", path)
	}
	return NewKeys(keys...), nil
}

// NewKeys returns the set of the given keys.
func NewKeys(keys ...string) *Keys {
	k := &Keys{}
	for _, key := range keys {
		k.hashes = append(k.hashes, sha256.Sum256([]byte(key)))
	}
	return k
}

// Open reports whether no key is configured (every request is let in).
func (k *Keys) Open() bool { return k == nil || len(k.hashes) == 0 }

// owner authenticates r. It returns the owner of the request's stored responses — a hash of
// its key, "" when the server is open — or false when a key is required and r has none or a
// wrong one.
func (k *Keys) owner(r *http.Request) (string, bool) {
	if k.Open() {
		return "", true
	}
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	key = strings.TrimSpace(key)
	if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" { // schemes are case-insensitive (RFC 9110, section 11.1)
		return "", false
	}
	h := sha256.Sum256([]byte(key))
	for i := range k.hashes {
		if subtle.ConstantTimeCompare(h[:], k.hashes[i][:]) == 1 {
			return hex.EncodeToString(h[:8]), true
		}
	}
	return "", false
}

// unauthorized writes the 401 answer of a missing or wrong key.
func unauthorized(w http.ResponseWriter, r *http.Request) {
	msg := "Incorrect API key provided."
	if r.Header.Get("Authorization") == "" {
		msg = "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'."
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="tether"`)
	writeHTTPError(w, &protocol.Error{Status: http.StatusUnauthorized, Type: protocol.TypeInvalidRequest, Code: protocol.CodeInvalidAPIKey, Message: msg})
}
