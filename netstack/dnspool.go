package netstack

import (
	"encoding/binary"
	"net/netip"
	"sync"
)

// poolSize is the number of fake-DNS addresses: 198.19.0.1 to
// 198.19.255.254 (the network and broadcast addresses are left out).
const poolSize = 1<<16 - 2

// exactReserve is how many addresses of the pool names that only a
// wildcard entry allows can never take: however many made-up names a guest
// asks for under "*.x", the names the policy lists exactly always find an
// address. A policy lists tens of exact names, hundreds at most; 4,096 is
// room for all of them with the rest of the pool (61,438 addresses) left to
// wildcards.
const exactReserve = 4096

// poolEntry is one address handed out for one name.
type poolEntry struct {
	name     string
	addr     netip.Addr
	wildcard bool // only a wildcard entry allowed the name
	flows    int  // live flows to addr: while > 0 the address is never recycled
	// prev and next link the entry into its idle list while flows == 0.
	prev, next *poolEntry
}

// idleList holds the entries without live flows, least recently used
// first: the order in which addresses are recycled.
type idleList struct{ head, tail *poolEntry }

func (l *idleList) pushBack(e *poolEntry) {
	e.prev, e.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = e
	} else {
		l.head = e
	}
	l.tail = e
}

func (l *idleList) remove(e *poolEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

// allocResult says why AddrFor did or did not give an address.
type allocResult int

const (
	allocOK        allocResult = iota
	allocCapped                // a new wildcard name beyond the session's cap
	allocExhausted             // every address is held by a live flow
)

// FakeDNS hands out one synthetic address from 198.19.0.0/16 per allowed
// name and maps addresses back to names when the guest dials them. It never
// asks a real resolver anything.
//
// An address stays with its name while the table has room. When the pool
// is used up, the least recently used address with no live flow is taken
// from its name and given to the new one (the old name no longer maps to
// it, and gets a new address if asked again). Names that only a wildcard
// entry allows may hold at most poolSize-exactReserve addresses, and at
// most the policy's max_wildcard_names distinct ones get an address per
// table (per session): that bounds both the table and the made-up names
// that reach real resolvers when the guest dials them.
type FakeDNS struct {
	mu        sync.Mutex
	byName    map[string]*poolEntry
	byAddr    map[netip.Addr]*poolEntry
	next      uint32 // offset of the next never-used address, from 1
	idleWild  idleList
	idleExact idleList
	wildHeld  int                 // entries with wildcard set
	seenWild  map[string]struct{} // distinct wildcard names given an address
	recycled  uint64
}

// NewFakeDNS returns an empty table.
func NewFakeDNS() *FakeDNS {
	return &FakeDNS{
		byName:   map[string]*poolEntry{},
		byAddr:   map[netip.Addr]*poolEntry{},
		seenWild: map[string]struct{}{},
		next:     1,
	}
}

func poolAddr(offset uint32) netip.Addr {
	base := PoolPrefix.Addr().As4()
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], binary.BigEndian.Uint32(base[:])+offset)
	return netip.AddrFrom4(b)
}

// AddrFor returns the synthetic address for name, allocating one if needed.
// wildcard says that only a wildcard entry allows the name; maxWild is the
// session's cap on distinct such names.
func (d *FakeDNS) AddrFor(name string, wildcard bool, maxWild int) (netip.Addr, allocResult) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.byName[name]; e != nil {
		if e.flows == 0 {
			d.idle(e).remove(e)
			d.idle(e).pushBack(e)
		}
		return e.addr, allocOK
	}
	_, seen := d.seenWild[name]
	if wildcard && !seen && len(d.seenWild) >= maxWild {
		return netip.Addr{}, allocCapped
	}
	e := d.takeLocked(wildcard)
	if e == nil {
		return netip.Addr{}, allocExhausted
	}
	e.name, e.wildcard = name, wildcard
	d.byName[name] = e
	d.byAddr[e.addr] = e
	if wildcard {
		d.wildHeld++
		d.seenWild[name] = struct{}{}
	}
	d.idle(e).pushBack(e)
	return e.addr, allocOK
}

// takeLocked returns an unlinked entry with an address for a new name: a
// never-used address, or the least recently used idle one, taken from its
// old name.
func (d *FakeDNS) takeLocked(wildcard bool) *poolEntry {
	var victim *poolEntry
	switch {
	case wildcard && d.wildHeld >= poolSize-exactReserve:
		victim = d.idleWild.head
	case d.next <= poolSize:
		a := poolAddr(d.next)
		d.next++
		return &poolEntry{addr: a}
	default:
		// Full: wildcard names give way first. A wildcard name may take
		// an exact name's address only while wildcards hold less than
		// their share, i.e. exact names hold more than the reserve.
		victim = d.idleWild.head
		if victim == nil {
			victim = d.idleExact.head
		}
	}
	if victim == nil {
		return nil
	}
	d.idle(victim).remove(victim)
	delete(d.byName, victim.name)
	if victim.wildcard {
		d.wildHeld--
	}
	d.recycled++
	return &poolEntry{addr: victim.addr}
}

func (d *FakeDNS) idle(e *poolEntry) *idleList {
	if e.wildcard {
		return &d.idleWild
	}
	return &d.idleExact
}

// NameOf returns the name a synthetic address is handed out for now.
func (d *FakeDNS) NameOf(a netip.Addr) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.byAddr[a]
	if !ok {
		return "", false
	}
	return e.name, true
}

// acquire returns the entry behind a synthetic address and holds it for a
// flow: until release, the address is never recycled, so the name the
// flow was decided for stays the name of its address.
func (d *FakeDNS) acquire(a netip.Addr) (*poolEntry, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.byAddr[a]
	if !ok {
		return nil, false
	}
	if e.flows == 0 {
		d.idle(e).remove(e)
	}
	e.flows++
	return e, true
}

// release ends one flow's hold on e; the address becomes the most recently
// used idle one when it was the last.
func (d *FakeDNS) release(e *poolEntry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e.flows--
	if e.flows == 0 {
		d.idle(e).pushBack(e)
	}
}

// poolStats are the table's figures, for Stack.Snapshot.
func (d *FakeDNS) poolStats() (held, wildcardNames int, recycled uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.byName), len(d.seenWild), d.recycled
}
