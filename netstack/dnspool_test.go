package netstack

import (
	"fmt"
	"net/netip"
	"testing"
)

// fillPool gives n names an address each.
func fillPool(t *testing.T, d *FakeDNS, n int, wildcard bool, prefix string) []netip.Addr {
	t.Helper()
	addrs := make([]netip.Addr, n)
	for i := range addrs {
		a, res := d.AddrFor(fmt.Sprintf("%s%d.example", prefix, i), wildcard, 1<<20)
		if res != allocOK {
			t.Fatalf("name %d of %d: %v", i, n, res)
		}
		addrs[i] = a
	}
	return addrs
}

func TestPoolHandsOutEveryAddressOnce(t *testing.T) {
	d := NewFakeDNS()
	addrs := fillPool(t, d, poolSize, false, "e")
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		if seen[a] || !PoolPrefix.Contains(a) || a == PoolPrefix.Addr() || a == netip.MustParseAddr("198.19.255.255") {
			t.Fatalf("address %s handed out twice or outside the pool's usable range", a)
		}
		seen[a] = true
	}
	if addrs[len(addrs)-1] != netip.MustParseAddr("198.19.255.254") {
		t.Errorf("last address %s, want 198.19.255.254", addrs[len(addrs)-1])
	}
}

func TestPoolRecyclesTheLeastRecentlyUsedIdleAddress(t *testing.T) {
	d := NewFakeDNS()
	addrs := fillPool(t, d, poolSize, false, "e")
	// e0 is the oldest but has a live flow; e1 was just asked for again.
	held, ok := d.acquire(addrs[0])
	if !ok {
		t.Fatal("acquire e0")
	}
	if a, _ := d.AddrFor("e1.example", false, 0); a != addrs[1] {
		t.Fatalf("e1 moved: %s", a)
	}
	a, res := d.AddrFor("new.example", false, 0)
	if res != allocOK {
		t.Fatalf("a full pool gave no address: %v", res)
	}
	if a != addrs[2] {
		t.Errorf("new name got %s, want e2's %s: the least recently used idle address", a, addrs[2])
	}
	if n, _ := d.NameOf(a); n != "new.example" {
		t.Errorf("NameOf(%s) = %q: the recycled address must name its new owner", a, n)
	}
	if n, ok := d.NameOf(addrs[0]); !ok || n != "e0.example" {
		t.Errorf("NameOf(%s) = %q %v: an address with a live flow must keep its name", addrs[0], n, ok)
	}
	// The old owner of the recycled address gets another one when asked.
	b, _ := d.AddrFor("e2.example", false, 0)
	if b == a || b == addrs[2] {
		t.Errorf("e2 got %s again: its address belongs to new.example now", b)
	}
	d.release(held)
	if _, _, recycled := d.poolStats(); recycled != 2 {
		t.Errorf("recycled %d addresses, want 2", recycled)
	}
}

func TestPoolNeverRecyclesALiveFlowsAddress(t *testing.T) {
	d := NewFakeDNS()
	addrs := fillPool(t, d, poolSize, false, "e")
	var held []*poolEntry
	for _, a := range addrs {
		e, ok := d.acquire(a)
		if !ok {
			t.Fatal("acquire")
		}
		held = append(held, e)
	}
	if _, res := d.AddrFor("new.example", false, 0); res != allocExhausted {
		t.Fatalf("every address has a live flow, yet a new name got one (%v)", res)
	}
	d.release(held[100])
	if a, res := d.AddrFor("new.example", false, 0); res != allocOK || a != addrs[100] {
		t.Errorf("after one flow ended: %s %v, want %s", a, res, addrs[100])
	}
	if n, _ := d.NameOf(addrs[101]); n != "e101.example" {
		t.Errorf("NameOf(%s) = %q", addrs[101], n)
	}
}

func TestPoolKeepsRoomForExactNames(t *testing.T) {
	d := NewFakeDNS()
	// Wildcards take their whole share; the next wildcard name recycles
	// another wildcard name's address, never one from the reserve.
	wild := fillPool(t, d, poolSize-exactReserve, true, "w")
	a, res := d.AddrFor("one-more.wild.example", true, 1<<20)
	if res != allocOK || a != wild[0] {
		t.Fatalf("wildcard beyond its share: %s %v, want the oldest wildcard address %s", a, res, wild[0])
	}
	// Every exact name of the reserve still gets a fresh address.
	exact := fillPool(t, d, exactReserve, false, "x")
	for _, a := range exact {
		if n, _ := d.NameOf(a); n == "" {
			t.Fatalf("exact name lost its address %s", a)
		}
	}
	// With the pool full, an exact name takes a wildcard name's address.
	b, res := d.AddrFor("late-exact.example", false, 0)
	if res != allocOK || b != wild[1] {
		t.Errorf("exact name in a full pool: %s %v, want the oldest idle wildcard address %s", b, res, wild[1])
	}
	// Wildcard names with live flows cannot be taken; then a wildcard
	// name fails rather than touch the reserve.
	d2 := NewFakeDNS()
	for _, a := range fillPool(t, d2, poolSize-exactReserve, true, "w") {
		d2.acquire(a)
	}
	if _, res := d2.AddrFor("more.wild.example", true, 1<<20); res != allocExhausted {
		t.Errorf("wildcards at their share, all busy: %v, want exhausted", res)
	}
	if _, res := d2.AddrFor("exact.example", false, 0); res != allocOK {
		t.Errorf("an exact name could not get a reserved address: %v", res)
	}
}

func TestPoolWildcardCapCountsDistinctNames(t *testing.T) {
	d := NewFakeDNS()
	for i := 0; i < 3; i++ {
		if _, res := d.AddrFor(fmt.Sprintf("n%d.wild.example", i), true, 3); res != allocOK {
			t.Fatalf("name %d: %v", i, res)
		}
	}
	if _, res := d.AddrFor("n3.wild.example", true, 3); res != allocCapped {
		t.Errorf("fourth distinct wildcard name: %v, want capped", res)
	}
	if _, res := d.AddrFor("n0.wild.example", true, 3); res != allocOK {
		t.Errorf("a name already counted: %v, want its address", res)
	}
	if _, res := d.AddrFor("n3.wild.example", true, 4); res != allocOK {
		t.Errorf("after the cap was raised (policy reload): %v", res)
	}
}
