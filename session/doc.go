// Package session is Tether's shape-neutral connection core and the append-shape adapter.
//
// A [Conn] owns one client connection's rollouts: it runs every create of both shapes
// ([Conn.Create], the one create pipeline), starts rollouts ([Conn.Start]), resumes
// suspended ones with tool outputs ([Conn.Resume]), cancels them ([Conn.Cancel]), keeps a
// bounded registry keyed by response id: its rollouts under their keys ([Conn.Chain],
// [Conn.Forget]) and the ended Responses a shape keeps under their own ids
// ([Conn.KeepResponse]: the public shape's segments, aliases of their rollout), ended entries of
// both kinds in one [Recent], evicted least recently used first under one set of bounds
// ([Limits.CacheResponses]),
// writes stored responses ([Conn.Persist], the one store writer), and drains on shutdown or at the connection
// age limit ([Conn.Drain]). Each rollout is a [sampler.Rollout] whose one goroutine Conn starts
// and counts; its phase is asked of it (sampler.Rollout.State). Conn hands it a ticket of its
// lane's FIFO sampling slot (a lane is a create's stream_id; "" is the default
// lane), so any number of rollouts may be suspended while at most one per lane samples, and the
// events of responses of one lane never interleave. Lanes sample concurrently, up to
// [Limits.MaxInflight] at once (granted in the order their turns became ready), and a
// connection may name [Limits.MaxLanes] lanes. Creates and appends that arrive while a lane's
// rollout samples wait in its queue, bounded by [Limits.QueueDepth]
// (websocket_queue_limit_reached beyond it). Frame writes are granted in arrival order, one
// frame per lane per round, and queued in a bounded outbox that one goroutine flushes, a
// burst of events in one network write ([Conn.Write], [Conn.Flush]). [Conn.Steer] hands a response.steer to a rollout.
//
// [ServeAppend] runs the append shape over a [Transport]: one Response per rollout, one
// sequence_number and output_index space per rollout, response.done at each suspension carrying
// the items since the previous suspension, the pending call_ids and the cumulative usage, and
// one terminal event. The wire protocol is documented in docs/append-protocol.md and summarised
// in package protocol.
//
// [Serve] is the one read loop of both shapes: it owns reading, binary, oversize and
// over-budget frames, decoding, draining and the error envelope, and hands each decoded client
// event to the shape's [Handler] (the append adapter here, the public one in package compat).
// A [Transport] carries the frames; package session/wstransport implements it over WebSocket,
// so this package does not depend on a WebSocket library. [Transport.Close] takes a
// protocol.CloseCode.
//
// # Memory accounting
//
// A rollout's size is its items ([ItemsBytes]) and its settings ([SettingsBytes]: tools,
// instructions, metadata); a kept Response's is the estimate its shape gives. Every registry
// entry's size is held in [Options.Budget] while the entry exists and released exactly once
// when it leaves, and a connection's registry holds at most the larger of CacheBytes and
// MaxRolloutBytes (ended entries are evicted first). [KeyLimit] bounds what one quota key
// ([QuotaKey]) holds at once. The server-wide index of live items ([LiveItems]) counts its
// own entries in the Budget, [LiveItemBytes] each, while they are indexed.
//
// Every create, on either shape, goes through [Conn.Create]: it passes [CheckFormat] (it
// compiles a text.format JSON schema) and [protocol.CheckCreate], then has its item_reference
// items replaced by the items they name ([ResolveItemRefs]: one walk of the connection's
// registry, then one lookup of the server's live append-shape items ([LiveItems]), then one of
// the store, for all of a request's references) and its compaction
// items by the window they stand for ([Compactor.Expand]; [Compactor.Compact] issues
// them for POST /v1/responses/compact, signed with [Options.Compaction]'s key, by default a
// per-process one), the backend's checks ([Conn.CheckModel]), and the one resolver of
// previous_response_id: the shape's registry on the connection ([Shape.Parent]), then
// [Options.Store] ([StoredChain]). The [Shape] chooses only the sink and hot vs cold
// ([Shape.Route]). See docs/fields.md.
//
// # How rollouts end
//
// A final answer ends a rollout with response.completed; response.cancel and the suspension
// timeout with response.incomplete (reasons "cancelled", "idle_timeout"); a model failure with
// response.failed. [Conn.Drain] (server shutdown, reason "server_shutdown"; age limit, reason
// "connection_limit") ends suspended and queued rollouts at once and lets a sampling one finish
// within [Limits.ShutdownGrace], then closes with 1001 — after the
// websocket_connection_limit_reached error frame for the age limit. A client disconnect frees
// every goroutine and the registry at once; nothing is sent.
//
// # Errors added to the table
//
// Conn's methods return an error holding a request-scoped *protocol.Error ([Conn.WriteError]
// answers it; the connection stays usable). [FrameTooLargeError] and the age limit are
// connection-fatal *protocol.ConnectionError values: [Conn.CloseWith] sends the envelope, then
// closes (1009, 1001).
//
// Besides the codes of protocol's error table this package answers response_already_completed (409,
// response.cancel of an ended rollout), response_in_progress (409, previous_response_id naming a
// rollout that has not ended, or a response running outside the connection: Options.InProgress,
// a background response), server_shutting_down (503, a create while draining) and
// store_unavailable (503, a previous_response_id lookup the store failed; also response.error
// of a store:true rollout the store did not accept, which then ends response.failed).
//
// # Stored responses
//
// A create with previous_response_id rebuilds the parent's chain (the hot path is
// response.append): its response.created carries protocol.Continuation (reason not_suspended,
// or not_on_connection when the store answered), and the create is logged at debug level.
// [Options.Store] (a store.Store, given as a value) resolves previous_response_id beyond the
// registry with one Chain call, and receives every store:true rollout that ends completed or
// incomplete before its terminal event is sent. A rollout gives back the server-wide sampling
// admission before its adapter writes to the store, so a slow store holds only its own
// connection's slot, for at most the store's timeout.
package session
