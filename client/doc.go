// Package client is a Go client for Tether's WebSocket protocols: the append shape
// (docs/append-protocol.md) and, as a fallback, the public shape of the OpenAI Responses API
// over WebSocket with previous_response_id.
//
// Entry points:
//
//   - [Dial] opens a [Conn]. It opts into the append shape with OpenAI-Beta: responses_append=v1
//     and falls back to the public shape when the 101 does not confirm the opt-in, so the same
//     code runs against any OpenAI-compatible Responses WebSocket server.
//   - [Conn.Start] starts a [Rollout] from a [CreateRequest]. [Rollout.Events] iterates its
//     events (an iter.Seq2) up to the next suspension or its end; [Rollout.Suspension] lists the
//     pending tool calls; [Rollout.Append] sends their outputs; [Rollout.Cancel] ends it;
//     [Rollout.Usage] and [Rollout.Response] read the result. Several rollouts may share one Conn.
//   - [Conn.Run] is the agent loop: it runs a rollout to its end with a map of [ToolFunc]s,
//     running parallel calls concurrently.
//
// Protocol flow, as the client sees it (append shape):
//
//	Start  → response.create
//	       ← response.created, response.in_progress, output events …
//	       ← response.done {pending_call_ids}        Events stops; Suspension() != nil
//	Append → response.append {response_id, input}
//	       ← output events … (same Response, numbering continues)
//	       ← response.completed                       Events stops; Response() != nil
//
// In the public shape each stop at tool calls is a completed Response. The client reports it
// as a suspension ([Event.Suspended] is set on that response.completed), and Append sends a new
// response.create with previous_response_id, the create's settings and the tool outputs. The
// Response that ends the rollout ([Event.Final], [Rollout.Response]) is merged over the
// segments: Output holds every model item of the rollout and Usage is the sum. Its ID is the
// last segment's id.
//
// # Types
//
// The package has its own small wire types ([Item], [Response], [Event]), decoded leniently,
// and uses package protocol's where the shape is the same ([Usage]). It imports nothing of the
// server but protocol (the wire vocabulary, standard library only) and internal/wsguard, which
// turns a message cut off by the end of the connection into a read error (the WebSocket
// library alone returns it as a whole, empty or truncated message).
// [Item], [Response] and [Event] keep the JSON they were decoded from in Raw, for members the
// types do not name.
//
// # Routing
//
// Lifecycle events and response.done are routed by response id. Output events carry no response
// id: they belong to the rollout holding the sampling slot of their lane (their stream_id;
// CreateRequest.StreamID names a rollout's lane, "" the default one), which the client tracks
// from the order in which it sent the lane's creates and appends (append-protocol.md,
// Scheduling and Lanes). Rollouts of different lanes sample concurrently on one Conn. error
// frames do not say which frame they answer (append-protocol.md, Known limitations): the
// client gives an error to the request whose response id or call_id (pending, or in the
// request's input) the message names, else to the oldest request not yet answered, of the
// error's lane when it names one, and of a kind the error can answer (a create for an error
// about previous_response_id, an append or a cancel for one about response_id). An error that
// names a rollout that has ended answers nothing (a second cancel's response_already_completed
// comes after the terminal event). A client that sends one request at a time per connection
// is never affected.
//
// # Reconnects
//
// When the server ends a connection for its age limit (the websocket_connection_limit_reached
// frame, close 1001) or closes it with 1001 (shutdown), rollouts that were suspended stay
// suspended on the client; their next Append dials a new connection and continues with a
// response.create that names the ended Response in previous_response_id (store:true, the
// default) or replays the rollout's whole context (store:false). The server ends those rollouts
// with response.incomplete (reason connection_limit or server_shutdown); the client does not
// pass that event on. Rollouts that were sampling or queued when the connection ended end as the
// server ended them (the incomplete event), or with [ErrConnectionLost]. A create sent while the
// server drains is refused with websocket_connection_limit_reached (a *Error from Events);
// the next Start uses a new connection. Options.NoReconnect turns reconnects off: a suspended
// rollout then ends with the server's response.incomplete, and the Conn with the WebSocket. Replaying is not possible for a rollout whose create named a
// previous_response_id with store:false: its Append returns [ErrCannotContinue].
//
// # Reattaching
//
// An append-shape Conn also opts into reattachment (OpenAI-Beta: responses_reattach=v1,
// append-protocol.md, Reattaching after a shutdown). A server that runs with a shared store
// (-store redis://…) then parks a suspended rollout to the store when it shuts down, instead
// of ending it, and tells the client with response.parked before it closes (1001, or 1012).
// The client does not pass that event on: the rollout stays suspended, and its next Append
// dials a new connection (to the same URL, any instance behind it) and sends response.append
// naming the same Response, which the server there claims from the store and continues, hot:
// same Response id, numbering going on, nothing resent. The parked rollout waits in the store
// while instances restart, so that append is sent again, after a backoff (50 ms doubling to
// 2 s, at most 10 times; the ctx of Append or Events bounds the waits), when an instance
// refuses it because it shuts down too (server_shutting_down), when the connection it went
// on closes without an answer, and when the upgrade of the new connection is refused with
// 502, 503 or 504; after the last try the refusal is returned. Should it be refused because
// the store has no such rollout (it expired, or another instance took it:
// response_not_found), Events returns that *Error once and the rollout has ended (Append:
// [ErrEnded]). Options.NoReconnect turns reattachment off too.
//
// # Errors
//
// A rejected frame is a [*Error] (status, type, code, param, message) returned by
// [Rollout.Events]; a rejected append or cancel leaves the rollout as it was. A refused upgrade
// is a *Error too, with the HTTP status. The sentinels in errors.go cover the client's own
// states.
//
// # Closing
//
// [Conn.Close] sends the WebSocket close frame (status 1000) and waits at most
// [DefaultCloseTimeout] (1 s) for the server's answer, then closes the TCP connection and
// returns an error saying the server did not answer; [Conn.CloseContext] waits until its ctx
// ends instead. (The WebSocket library alone would wait up to 5 s for the frame's write and
// 5 s more for the answer.) A reconnect dial under way gives up at once. After Close every
// call that would use the connection returns [ErrClosed] (Append and Cancel too, whatever the
// rollout's state), and Events returns it once for each rollout that had not ended.
//
// # Contexts
//
// The ctx of Start, Append and Cancel bounds sending the frame: a ctx that has ended sends
// nothing and returns its error, and the rollout is as it was. A ctx that ends while the frame
// is being written (a server that does not read) cuts the frame, and a WebSocket cannot go on
// after half a frame: the connection ends, and its rollouts with ErrConnectionLost. The ctx of
// Events bounds the wait for the next event only: its end stops the iteration, and the events
// that come meanwhile wait for the next call.
package client
