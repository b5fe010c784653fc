package proto

import "runtime"

// goroutines counts the process's goroutines, read until two readings in a
// row agree. One runtime.NumGoroutine reading can be off by a batch of 32:
// it sums the runtime's free lists while the scheduler moves dead goroutines
// between a P's list and the global one (runtime.gcount says the result "can
// be inconsistent"). FuzzClient failed in CI once on such a reading, "35
// goroutines more than before the client" for a 122-byte input whose client
// had started 3.
func goroutines() int {
	n := runtime.NumGoroutine()
	for range 8 {
		m := runtime.NumGoroutine()
		if m == n {
			return n
		}
		n = m
	}
	return n
}
