// Command uibench measures capsem ui against its target: the sessions
// page and the first screen of a session of a million events each served
// in at most 200 ms, so that a day-long session opens as fast as a short
// one. It writes a store of one session of -events events of
// every kind and -sessions small ones, runs the real `capsem ui` on it,
// and times GETs of each page from a fresh connection: cold (the store
// closed, as after a second without requests, so the time includes
// opening it) and warm (one request right after another). It also times
// the host summary, which reads the whole session once and is then
// cached. Figures go to stdout for docs/BENCHMARKS.md.
//
// Usage: go run ./bench/uibench [-events 1000000] [-sessions 100] [-n 20] [-store DIR]
package main
