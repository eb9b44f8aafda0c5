// Package server is Tether's HTTP handler (architecture §2): [New] returns a [Server] that
// routes GET /healthz and /v1/responses. A WebSocket upgrade that opts into the append shape —
// an OpenAI-Beta header list containing responses_append=v1, or the query protocol=append.v1
// ([WantsAppend]) — is confirmed with OpenAI-Beta: responses_append=v1 on the 101 and served by
// package session. [Server.Shutdown] drains every WebSocket (http.Server.Shutdown does not wait
// for hijacked connections).
//
// It holds no protocol logic; cmd/tether, the bench and the conformance self-test use it.
package server
