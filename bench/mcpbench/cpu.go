package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

const clockTicks = 100 // USER_HZ on Linux

// procCPU is a process's user+system CPU seconds so far.
func procCPU(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clockTicks
}

// machineBusy is the machine's busy and total CPU counters from /proc/stat.
func machineBusy() (busy, total float64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	// user nice system idle iowait irq softirq steal
	for i, s := range f[1:min(len(f), 9)] {
		v, _ := strconv.ParseFloat(s, 64)
		total += v
		if i != 3 && i != 4 && i != 7 { // idle, iowait, steal
			busy += v
		}
	}
	return busy, total
}

// waitQuiet waits (up to 15 s) until the machine is idle — below a
// tenth of its capacity for half a second: the figures are latencies of a
// few hundred microseconds on two cores, and anything else running shows
// up in their tails. The wait is short because this machine is shared with
// other sessions' test runs that can keep it busy for minutes: a path that
// could not wait for quiet is measured anyway, and the report says how busy
// the machine was. It records the most background load it started with.
func waitQuiet() {
	var load float64
	for deadline := time.Now().Add(15 * time.Second); ; {
		b0, t0 := machineBusy()
		time.Sleep(500 * time.Millisecond)
		b1, t1 := machineBusy()
		if t1 > t0 {
			load = (b1 - b0) / (t1 - t0)
		}
		if load < 0.1 || time.Now().After(deadline) {
			break
		}
	}
	maxBackground = max(maxBackground, load)
}

// maxBackground is the most background load (a fraction of the machine) a
// measurement started with.
var maxBackground float64
