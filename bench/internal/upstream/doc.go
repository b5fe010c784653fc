// Package upstream is the host side of the HTTPS upstream a benchmark runs
// as a process of its own (so that its CPU is counted apart): a CA of the
// benchmark's own standing in for a public CA, with a leaf for the
// upstream's names, and the process started, its port read, and stopped.
//
// The contract with the upstream process: it prints its TCP port on
// 127.0.0.1 on its first line of stdout and serves until its stdin closes.
//
// It never serves anything itself (each bench's "upstream" sub-mode does)
// and never touches capsem's own CA; it is bench code, never imported by
// capsem itself.
package upstream
