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
// The last seven run a victim (small creates, one after another) during the attack; its
// outcomes are counted as "victim …".
package attack
