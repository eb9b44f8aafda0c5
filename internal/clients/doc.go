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
//     provider, which must not fall back to HTTP;
//   - the OpenAI Agents SDK (npm "@openai/agents"): two agent runs, the second continued with
//     previousResponseId, over WebSocket (useResponsesWebSocket) and over HTTP;
//   - the Vercel AI SDK (npm "ai" and "@ai-sdk/openai"): the same over HTTP, the only transport
//     it has for the Responses API.
//
// The npm clients live outside the repository: .ci/install-clients DIR installs them, and
// TETHER_NODE_CLIENTS=DIR points the tests at DIR/node_modules; unset, they use
// /tmp/tether-clients (where .ci/run installs them) when it holds node_modules. Without either
// those tests skip, unless TETHER_REQUIRE_CLIENTS=1, which makes them fail (CI sets both).
package clients
