// Package conformance is a black-box conformance suite for servers of the OpenAI Responses API
// over WebSocket (the public shape) and of Tether's append shape
// (docs/append-protocol.md). Point it at any server — Tether, a gateway, a
// model server that claims Responses WebSocket mode — with [Run] or `tether conform`.
//
// It is a client: it speaks raw JSON over github.com/coder/websocket and net/http and imports
// no package of this module (a test checks `go list -deps`), so it tests the wire, not our
// types.
//
// # How it reads
//
// Each scenario is a short function on a peer-side DSL — [Peer] methods expectEvent,
// expectError, expectNothing and expectClose, and on top of them start, resume and rollout,
// which drive an agent loop the same way in both shapes (public: a new response.create with
// previous_response_id at each stop; append: response.append to the same rollout). A scenario
// is marked public-only, append-only, both (the same body runs once per shape, named
// "public/…" and "append/…") or cross-shape (it runs once through both shapes: the
// "equivalence/…" scenarios compare the same rollout's items modulo ids and segmenting,
// answer, context fingerprint and token counts; "cross-shape/store" continues through one
// shape what the other stored). [Scenarios] lists them.
//
// Every frame received is checked, in every scenario, by a grammar checker before the
// scenario sees it: sequence_number contiguous from 0 per response (public) or per rollout
// including response.done (append); each item opened by output_item.added and closed by
// output_item.done before the next opens; deltas concatenating to the .done text or
// arguments and to the item; response.done carrying exactly the items since the previous
// suspension and their call_ids; the terminal Response's output equal to the
// output_item.done items; unique response, item and call ids; exactly one terminal event and
// nothing of that response after it; no interleaving of responses within a lane; the error envelope
// ([Grammar], which other tests can run on the frames they read). With
// [Config.SchemaFile] every event, error frame and Response is also validated against the
// Open Responses OpenAPI file (github.com/santhosh-tekuri/jsonschema/v6).
//
// Lanes (stream_id): each named lane of a connection is checked by its own
// grammar (frames are routed by their stream_id; the default lane's carry none), so the
// responses of different lanes may interleave. The "lanes/…" scenarios test concurrency across
// lanes, per-lane FIFO, attribution of every event and request-scoped error, invalid names,
// the limit of 32 distinct names, forks across lanes, a failed fork keeping its parent, and a
// slow lane not stalling another.
//
// Every wait has a deadline ([Config.Timeout]); a server that stops answering fails the
// scenario with the frames last exchanged.
//
// # Model contracts
//
// Under [ContractSim] (the default) the server is taken to be Tether with its sim model:
// scenarios may request exact call counts, parallel calls, failures and slow sampling with
// the sim's metadata keys (sim.calls, sim.parallel, sim.fail, sim.speed, sim.answer_tokens),
// check that the answer quotes the context, compare context fingerprints and cached_tokens,
// and check Tether's documented choices. Under [ContractAny] those checks
// are skipped — whole scenarios with a reason, single checks listed in
// [Result.SkippedChecks] — and what every conforming server must do is still asserted:
// grammar, lifecycle, errors, previous_response_id resolution and eviction. A scenario that
// needs a tool call is skipped if the model answers without one. The requests are the same
// under both contracts (a server that is not Tether ignores the sim.* metadata keys).
//
// Append-shape scenarios are skipped when the server does not confirm the opt-in on the 101.
//
// # Excluded cases
//
// [Excluded] lists what the suite does not test, each with its reason; the -json report
// repeats it.
package conformance

// Excluded returns the cases of the specification that no scenario covers, with the reason.
func Excluded() []Exclusion {
	return []Exclusion{
		{"websocket_connection_limit_reached (connection age limit, close 1001)",
			"needs a server started with a short -max-connection-age; the default is 60 minutes"},
		{"response.incomplete reason idle_timeout (suspended longer than -suspend-timeout)",
			"needs a server started with a short -suspend-timeout; the default is 10 minutes"},
		{"server shutdown: server_shutting_down (503), reason server_shutdown, close 1001",
			"the suite cannot stop the server it tests"},
		{"server_error (500) before a response exists",
			"an internal failure cannot be provoked from the wire"},
		{"parents evicted by the connection's registry bounds (-cache-responses, -cache-bytes)",
			"the bounds are server configuration; eviction after a failed continuation (public shape) is tested"},
		{"the in-flight limit across lanes (16 responses sampling at once; more queue)",
			"queueing is indistinguishable from a slow model on the wire; lane concurrency, per-lane FIFO and the lane-count limit are tested"},
		{"non-function tools (custom, namespace, hosted tools)",
			"the Open Responses schema's Tool union allows only function tools, so schema-validated scenarios use function tools only"},
		{"schema validation of response.done and response.steer.*",
			"the Open Responses file does not define them (response.done is the append shape's own event); the grammar checks them"},
		{"schema validation of WebSocket error frames against ErrorStreamingEvent",
			"it requires sequence_number, which error frames must not carry; they are validated against WebSocketErrorEvent"},
		{"DELETE /v1/responses/{id} and GET /v1/responses/{id}/input_items",
			"HTTP endpoints outside the WebSocket protocols; GET /v1/responses/{id} is tested"},
		{"client disconnect frees the connection's state",
			"not observable from the wire"},
	}
}
