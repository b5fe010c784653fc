package cpu

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ on Linux, the unit of /proc's CPU counters.
const clockTicks = 100

// ProcSeconds is process pid's user+system CPU seconds so far; 0 for pid 0,
// a process that is gone, or no /proc.
func ProcSeconds(pid int) float64 {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	return parseProcStat(data)
}

// parseProcStat reads utime and stime from a /proc/PID/stat line.
func parseProcStat(data []byte) float64 {
	// Fields after the command name, which is in parentheses and may hold
	// spaces and parentheses itself: the last ')' ends it.
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
