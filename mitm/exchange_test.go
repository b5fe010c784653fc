package mitm

import "testing"

// The reverse proxy's copy buffers come and go without allocating.
func TestBufferPoolDoesNotAllocate(t *testing.T) {
	var bp bufferPool
	bp.Put(bp.Get())
	if n := testing.AllocsPerRun(100, func() { bp.Put(bp.Get()) }); n != 0 {
		t.Errorf("%v allocations per Get and Put, want 0", n)
	}
}
