package protocol

import (
	"hash/maphash"
	"sync"
)

// callTable maps call_ids to a byte of flags for CheckContinuation: open addressing over
// maphash values, each id hashed once per lookup and compared only on a hash match, its slots
// reused through a pool. It walks a whole chain at each continuation, so it allocates nothing
// once warm and costs a fraction of a map[string]uint8 with string keys.
type callTable struct {
	seed  maphash.Seed
	slots []callSlot // a power of two long, at most half full
	n     int        // slots used
}

type callSlot struct {
	id    string
	hash  uint64
	used  bool
	flags uint8
}

var callTables = sync.Pool{New: func() any { return &callTable{seed: maphash.MakeSeed()} }}

// maxPooledSlots bounds the table a pool keeps (32 B a slot): a continuation of a very long
// chain allocates its own.
const maxPooledSlots = 1 << 14

// getCallTable returns an empty table with room for n ids before it grows.
func getCallTable(n int) *callTable {
	t := callTables.Get().(*callTable)
	size := 16
	for size < 2*n {
		size *= 2
	}
	if len(t.slots) < size {
		t.slots = make([]callSlot, size)
	}
	return t
}

// put clears t and returns it to the pool.
func (t *callTable) put() {
	if len(t.slots) > maxPooledSlots {
		return
	}
	clear(t.slots)
	t.n = 0
	callTables.Put(t)
}

// flags returns the flags of id, adding it with none when it is new. The pointer is valid
// until the next call.
func (t *callTable) flags(id string) *uint8 {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	h := maphash.String(t.seed, id)
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if !s.used {
			*s = callSlot{id: id, hash: h, used: true}
			t.n++
			return &s.flags
		}
		if s.hash == h && s.id == id {
			return &s.flags
		}
	}
}

// get returns the flags of id, 0 when it is not in the table.
func (t *callTable) get(id string) uint8 {
	h := maphash.String(t.seed, id)
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if !s.used {
			return 0
		}
		if s.hash == h && s.id == id {
			return s.flags
		}
	}
}

func (t *callTable) grow() {
	old := t.slots
	t.slots = make([]callSlot, 2*len(old))
	mask := uint64(len(t.slots) - 1)
	for _, s := range old {
		if !s.used {
			continue
		}
		i := s.hash & mask
		for t.slots[i].used {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}
