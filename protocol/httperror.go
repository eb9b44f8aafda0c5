package protocol

import "net/http"

// WriteHTTPError answers an HTTP request with e: the body of AppendHTTPError, status
// e.HTTPStatus(), Content-Type application/json. A server_overloaded, too_many_connections,
// server_shutting_down or store_unavailable error (503) also gets "Retry-After: 1", which the
// OpenAI SDKs wait before their retry.
func WriteHTTPError(w http.ResponseWriter, e *Error) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	switch e.Code {
	case CodeOverloaded, CodeTooManyConnections, CodeShuttingDown, CodeStoreUnavailable:
		// a full server, a draining one (a retry on a new connection reaches another
		// instance, or this one restarted), or a store that did not answer in time: worth a
		// retry in a second
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(e.HTTPStatus())
	_, _ = w.Write(AppendHTTPError(nil, e))
}
