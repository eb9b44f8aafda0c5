// Package server is Tether's HTTP handler (architecture §2): [New] returns a [Server] that
// routes GET /healthz and /v1/responses. A WebSocket upgrade that opts into the append shape —
// an OpenAI-Beta header list containing responses_append=v1, or the query protocol=append.v1
// ([WantsAppend]) — is confirmed with OpenAI-Beta: responses_append=v1 on the 101 and served by
// package session. [Server.Shutdown] drains every WebSocket (http.Server.Shutdown does not wait
// for hijacked connections); /healthz answers 503 {"status":"draining"} from then on.
//
// Stored responses live in Options.Store (a store.Store: memory, or Redis shared by several
// instances); the server wraps it with store.Guard (-store-timeout, tether_store_errors_total)
// and hands the same value to both shapes.
//
// It holds no protocol logic; cmd/tether, the bench and the conformance self-test use it.
package server
