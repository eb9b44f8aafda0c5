// Package store keeps stored responses (store:true) for previous_response_id, GET/DELETE
// /v1/responses/{id} and GET /v1/responses/{id}/input_items.
//
// [Store] is a ctx-first, error-returning interface, modelled on Litestream's ReplicaClient:
// a remote store can be slow or down, so every call can fail. [ErrNotFound] (and
// [ErrCursorNotFound] for a bad input_items cursor) are answers; any other error is a store
// failure, which the server answers store_unavailable. Owner checks happen inside the store:
// a lookup by another API key gets ErrNotFound and changes nothing, not even recency.
// [Store.Chain] returns a whole ancestor chain in one call (one round trip for Redis), so the
// cold path does not fetch one response per ancestor.
//
// Implementations, both run through the conformance suite of package storetest:
//
//   - [Memory] (-store memory, the default): in this process, bounded by -store-responses
//     and -store-bytes ([Size]), least recently used evicted first.
//   - [Redis] (-store redis://host:port/db, Redis 7 or later): shared by several Tether
//     instances, with the same bounds and per-key quotas over the whole deployment, a sliding
//     TTL (-store-ttl, default 30 days), and eviction of the least recently used when Redis
//     reaches its maxmemory.
//
// Both implement [KeyQuotas] (-key-store-responses, -key-store-bytes): over its quota a key's
// own least recently used responses are evicted, never another key's.
//
// # Redis key layout
//
// With the default prefix "tether:":
//
//	tether:r:<owner>:<id>  hash: parent, response (JSON, output []), output, input, chain,
//	                       items (the ids of input and output)
//	tether:i:<owner>:<item id>  set: the owner's response keys holding the item (the item index)
//	tether:lru             sorted set: response key → last use (unix µs)
//	tether:sizes           hash: response key → Size in bytes
//	tether:bytes           the sum of tether:sizes
//	tether:clock           the last LRU stamp given out
//	tether:iclock          the last stamp an indexing build gave out
//	tether:legacy          how often a stamp of an older build was seen
//	tether:itemidx         tether:legacy when every stored response was last indexed
//	tether:quotas          hash: response key → its quota key (per-key quotas only)
//	tether:q:<quota>       sorted set: a quota key's response keys → last use
//	tether:qbytes          hash: quota key → the sum of its responses' Size
//
// <owner> is the owner id the server gives (the key_id of its access log: the first 16 hex
// digits of SHA-256(API key), empty on an open server), escaped as in a URL query: the key
// itself is never written.
// Each call is one Lua script, so it is atomic and one round trip; Chain walks the parent
// pointers inside Redis. The scripts touch keys they find by walking, so the store needs a
// single Redis (or primary), not Redis Cluster.
//
// [Guard] wraps a store for the server: each call runs under a timeout (-store-timeout,
// default 5s), each failure is counted (tether_store_errors_total), and an outage is logged
// when it starts and when it ends. go-redis reconnects by itself, so a Redis that comes back
// is used again without a restart.
//
// [FindItems] (the optional [ItemFinder], implemented by Memory, Redis and Guarded) finds
// input or output items of the owner's stored responses by id, for the item_reference items of
// a request, through an item index (item id → the owner's responses holding it) that Put,
// eviction, expiry and Delete keep: O(references), whatever the store holds.
//
// # Durability before acknowledgement
//
// The adapters write a store:true response before they send its terminal event; when the
// write fails or times out the response ends response.failed with code store_unavailable
// instead, and the connection's in-memory state (its hot path) is unaffected. store:false
// responses are never written.
package store
