// Package server is Tether's HTTP handler: [New] returns a [Server] that
// routes GET /healthz, /v1/responses, GET /v1/models, /metrics and, with [Options.Pprof],
// /debug/pprof/. A WebSocket upgrade that opts into the append shape — an OpenAI-Beta header
// list containing responses_append=v1, or the query protocol=append.v1 ([WantsAppend]) — is
// confirmed with OpenAI-Beta: responses_append=v1 on the 101 and served by package session.
// [Server.BeginShutdown] marks the server draining at once and [Server.Shutdown] waits for every
// WebSocket and HTTP response (http.Server.Shutdown does not wait for hijacked connections);
// during the drain /healthz answers 503 and new creates 503 server_shutting_down;
// [Server.EndGrace] ends the grace at once (a second signal).
//
// Every request is authenticated before routing (with keys, an unknown route answers 401, not
// 404) and logged on one access line (accesslog.go); HTTP error answers count in
// tether_errors_total beside the error frames.
//
// Stored responses live in Options.Store (a store.Store: memory, or Redis shared by several
// instances); the server wraps it with store.Guard (-store-timeout, tether_store_errors_total)
// and hands the same value to both shapes.
//
// It holds no protocol logic; cmd/tether, the bench and the conformance self-test use it.
package server
