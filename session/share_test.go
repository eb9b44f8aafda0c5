package session

import "testing"

// A key holds at most its share of the decoding slots, even alone: the rest stays free for
// a key that comes later.
func TestKeyShareOfSlots(t *testing.T) {
	b := NewBudget(1000, 4)
	b.SetKeyShare(0.5)
	var bs []*Reservation
	for i := range 2 {
		r, err := b.AdmitBody("b", 10)
		if err != nil {
			t.Fatalf("B's body %d: %v", i, err)
		}
		bs = append(bs, r)
	}
	if _, err := b.AdmitBody("b", 10); err == nil {
		t.Fatal("B admitted past its share of 2 slots")
	}
	for i := range 2 {
		r, err := b.AdmitBody("a", 10)
		if err != nil {
			t.Fatalf("A's body %d: %v", i, err)
		}
		bs = append(bs, r)
	}
	if _, err := b.AdmitBody("c", 10); err == nil {
		t.Fatal("C admitted with every slot held")
	}
	bs[0].Keep(5) // decoded: the slot goes back, 5 bytes stay
	if _, err := b.AdmitBody("a", 10); err == nil {
		t.Fatal("A admitted past its share")
	}
	r, err := b.AdmitBody("b", 10)
	if err != nil {
		t.Fatalf("B after one of its bodies was decoded: %v", err)
	}
	bs = append(bs, r)
	for _, r := range bs {
		r.Release()
	}
	if b.InUse() != 0 || len(b.shares.held) != 0 {
		t.Fatalf("after every release: %d bytes, %d keys holding", b.InUse(), len(b.shares.held))
	}
}

// Bytes: a key over half the budget is refused; a key holding nothing may always take one
// reservation.
func TestKeyShareOfBytes(t *testing.T) {
	b := NewBudget(1000, 0)
	b.SetKeyShare(0.5)
	if !b.TryReserveFor("a", 0, 10) {
		t.Fatal("A's first bytes")
	}
	if !b.TryReserveFor("b", 0, 400) || b.TryReserveFor("b", 0, 200) {
		t.Fatal("B's 400 fit its share of 500, another frame of 200 does not")
	}
	if !b.TryReserveFor("c", 0, 300) || !b.TryReserveFor("c", 300, 280) {
		t.Fatal("C's one frame, growing past its share, fits while C holds nothing else")
	}
	b.ReleaseFor("a", 10)
	b.ReleaseFor("b", 400)
	b.ReleaseFor("c", 580)
	if b.InUse() != 0 || len(b.shares.held) != 0 {
		t.Fatalf("after every release: %d bytes, %d keys holding", b.InUse(), len(b.shares.held))
	}
}
