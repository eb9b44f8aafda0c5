package session

import (
	"testing"
	"time"
)

// A key alone may use the whole capacity; once another key has been refused (or holds
// something), the first keeps to its share until ShareWindow has passed.
func TestKeyShareBorrowsOnlyAlone(t *testing.T) {
	b := NewBudget(1000, 4)
	b.SetKeyShare(0.5)
	now := time.Unix(0, 0)
	b.shares.now = func() time.Time { return now }
	var bs []*Reservation
	for i := range 4 {
		r, err := b.AdmitBody("b", 10)
		if err != nil {
			t.Fatalf("B alone, body %d: %v", i, err)
		}
		bs = append(bs, r)
	}
	if _, err := b.AdmitBody("a", 10); err == nil {
		t.Fatal("A admitted with every slot held")
	}
	bs[0].Release()
	bs[1].Release()
	// A was refused a moment ago: it is active, so B (holding 2 of its 2) is held back and
	// the freed slots are A's.
	if _, err := b.AdmitBody("b", 10); err == nil {
		t.Fatal("B admitted past its share while A is active")
	}
	ra, err := b.AdmitBody("a", 10)
	if err != nil {
		t.Fatalf("A within its share: %v", err)
	}
	ra.Release()
	now = now.Add(ShareWindow + time.Second)
	r, err := b.AdmitBody("b", 10)
	if err != nil {
		t.Fatalf("B alone again after the window: %v", err)
	}
	r.Release()
	for _, r := range bs {
		r.Release()
	}
	if b.InUse() != 0 || len(b.shares.held) != 0 {
		t.Fatalf("after every release: %d bytes, %d keys holding", b.InUse(), len(b.shares.held))
	}
}

// Bytes: a key over half the budget is refused while another holds some; a key holding
// nothing may always take one reservation.
func TestKeyShareOfBytes(t *testing.T) {
	b := NewBudget(1000, 0)
	b.SetKeyShare(0.5)
	if !b.TryReserveFor("a", 10) {
		t.Fatal("A's first bytes")
	}
	if !b.TryReserveFor("b", 400) || b.TryReserveFor("b", 200) {
		t.Fatal("B's 400 fit its share of 500, 200 more do not")
	}
	if !b.TryReserveFor("c", 580) {
		t.Fatal("C holding nothing may take one reservation larger than its share")
	}
	b.ReleaseFor("a", 10)
	b.ReleaseFor("b", 400)
	b.ReleaseFor("c", 580)
	if b.InUse() != 0 || len(b.shares.held) != 0 {
		t.Fatalf("after every release: %d bytes, %d keys holding", b.InUse(), len(b.shares.held))
	}
}
