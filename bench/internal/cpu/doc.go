// Package cpu reads the CPU time the benchmarks account for, from Linux's
// /proc: a process's user+system seconds (/proc/PID/stat) and the machine's
// busy, interrupt and total counters (/proc/stat), so that every bench
// counts a "core" alike.
//
// It only reads: it never samples in the background, never waits, and
// answers 0 where /proc is missing (another OS) rather than failing a run;
// it is bench code, never imported by capsem itself.
package cpu
