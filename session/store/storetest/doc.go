// Package storetest is the conformance suite of the store.Store interface: every
// implementation runs the same tests through [Run] — round trips, owner isolation (a non-owner
// finds nothing and changes nothing), delete, input_items pagination, Chain over public-shape
// and append-shape records, least-recently-used eviction by count and by bytes,
// concurrent use, and parked rollouts (store.Parker: claimed once, by its owner, before its
// ttl, by exactly one of racing callers).
package storetest
