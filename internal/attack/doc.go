// Package attack runs the resource attacks against `tether serve` child
// processes and reports, per attack, the server's peak resident memory (VmHWM), the latency
// of GET /healthz during the attack, and what the server answered or refused. Each attack
// gets a fresh server so that its peak is its own. `tether attack` is its command.
//
// The attacks, at scale 1 (Config.Scale multiplies the counts, not the sizes):
//
//	tools       64 append-shape creates with a 24 MiB tool description on one connection
//	store       146 store:true POSTs with a 24 MiB tool description
//	decode      8 concurrent 32 MiB POSTs of about 1.1 M tiny input items
//	idle-ws     103 WebSockets that each send one 31 MiB frame, then idle
//	stalled     141 POSTs with Content-Length 32 MiB that stall 1,000 bytes before the end
//	keepalive   20,000 keep-alive connections idle after one GET /healthz
//	starve      key B: 10,000 tiny stored POSTs; then key A's stored response is looked up
//	chat-body   32 MiB POST /v1/chat/completions bodies of tiny messages on 12 connections, repeated
//	compact-body 32 MiB POST /v1/responses/compact bodies of tiny items on 24 connections, repeated
//	header-only 280 POSTs that send headers (Content-Length: 100) and no body, held
//	get-unread  one stored response with a 24 MiB tool, then 60 GETs of it never read
//	unread-ws   100 WebSockets that never read, each creating a response with 4 MiB of instructions
//	image-outputs 60 stored creates whose function_call_output is one 16 MiB input_image part
//	key-share   key B: 280 POSTs (Content-Length: 100) that send one byte of body, held; the
//	            victim is key A
//
//	many-ws     10,000 idle WebSockets, held
//	schema      creates whose text.format schema has 80,000 properties (2 MB)
//	sim-schema  300-byte creates whose schema asks the sim for 10⁸ strings of 300,000
//	            characters (nested arrays, minItems 100), with max_output_tokens 100 and without
//
// The upstream attacks start a misbehaving upstream on a loopback port and the server with
// -backend chat (or responses) -upstream at it; 8 clients at scale 1 (2 at least) stream
// creates that the upstream answers with its fault, and each client's terminal event is
// counted. The upstream answers every other request (the victim's) normally.
//
//	chat-text   endless text deltas (every other client asks max_output_tokens 100)
//	chat-args   one tool call whose arguments never end
//	chat-line   one unterminated SSE line of 1 GiB, then silence
//	chat-event  data: lines that never end an event
//	chat-chunk  one valid chunk of 300 MiB of text
//	resp-deltas a Responses upstream's endless text deltas (every other client asks
//	            max_output_tokens 100)
//	resp-huge   a Responses upstream's text deltas of 60 MiB each
//
// During every attack a victim makes small creates one after another (with key A when the
// attack uses keys) and a prober, a process of its own (see ProbeEnv), asks GET /healthz every
// 25 ms: Result reports the victim's successes and the /healthz latencies.
package attack
