package main

import (
	"fmt"
	"net/url"
	"strings"
)

// urlForms is the help text of every -url flag.
const urlForms = "the server: its API base URL (http://127.0.0.1:8787/v1); also accepted: http://127.0.0.1:8787, " +
	"127.0.0.1:8787, ws://127.0.0.1:8787/v1/responses, https/wss, and a path prefix before /v1"

// serverURL is a server given by -url, in one of the forms of urlForms.
type serverURL struct {
	secure bool
	host   string // host[:port]
	prefix string // path before /v1, "" or "/…" without a trailing slash
}

// parseServerURL parses the -url value raw of flag name (for the error).
func parseServerURL(name, raw string) (serverURL, error) {
	s := strings.TrimSpace(raw)
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return serverURL{}, fmt.Errorf("%w: %s %q: want %s", errUsage, name, raw, urlForms)
	}
	var su serverURL
	switch u.Scheme {
	case "http", "ws":
	case "https", "wss":
		su.secure = true
	default:
		return serverURL{}, fmt.Errorf("%w: %s %q: scheme %q: want http, https, ws or wss", errUsage, name, raw, u.Scheme)
	}
	su.host = u.Host
	switch p := strings.TrimRight(u.Path, "/"); {
	case p == "":
	case strings.HasSuffix(p, "/v1"):
		su.prefix = strings.TrimSuffix(p, "/v1")
	case strings.HasSuffix(p, "/v1/responses"):
		su.prefix = strings.TrimSuffix(p, "/v1/responses")
	default:
		return serverURL{}, fmt.Errorf("%w: %s %q: the path must end in /v1 or /v1/responses (or be empty); want %s", errUsage, name, raw, urlForms)
	}
	return su, nil
}

// Base is the server's root: http(s)://host[:port][prefix].
func (u serverURL) Base() string {
	scheme := "http"
	if u.secure {
		scheme = "https"
	}
	return scheme + "://" + u.host + u.prefix
}

// API is the API base URL: Base + "/v1".
func (u serverURL) API() string { return u.Base() + "/v1" }

// WebSocket is the Responses WebSocket URL: ws(s)://host[:port][prefix]/v1/responses.
func (u serverURL) WebSocket() string {
	scheme := "ws"
	if u.secure {
		scheme = "wss"
	}
	return scheme + "://" + u.host + u.prefix + "/v1/responses"
}
