// Package clients holds Tether's tests against real third-party clients.
//
// The tests start the server in process (internal/server on an httptest server) and drive it
// with clients that users actually run:
//
//   - openai-go v3 (Go module, test-only dependency): Responses over WebSocket
//     (client.Responses.Connect) and over HTTP SSE (client.Responses.NewStreaming);
//   - openai-node (npm "openai" with "ws"): the ResponsesWS transport and the strict
//     client.responses.stream() SSE accumulator, run as scripts in testdata/node;
//   - the Codex CLI (npm "@openai/codex"): a real agent turn over WebSocket with a custom
//     provider, which must not fall back to HTTP.
//
// The npm clients live outside the repository: .ci/install-clients DIR installs them, and
// TETHER_NODE_CLIENTS=DIR points the tests at DIR/node_modules. Without it those tests skip,
// unless TETHER_REQUIRE_CLIENTS=1, which makes them fail (CI sets both).
package clients
