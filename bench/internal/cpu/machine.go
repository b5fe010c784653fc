package cpu

import (
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Jiffies are the machine's CPU counters from /proc/stat, all CPUs summed,
// in clock ticks.
type Jiffies struct {
	Busy  float64 // everything but idle, iowait and steal (interrupts included)
	IRQ   float64 // irq and softirq: network processing outside any process's account
	Total float64
}

// Machine reads the machine's counters; zero Jiffies without /proc.
func Machine() Jiffies {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Jiffies{}
	}
	return parseStat(data)
}

// parseStat reads the first ("cpu ") line of /proc/stat.
func parseStat(data []byte) Jiffies {
	var j Jiffies
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 2 {
		return j
	}
	// user nice system idle iowait irq softirq steal (guest and guest_nice
	// are already in user and nice)
	for i, s := range f[1:min(len(f), 9)] {
		v, _ := strconv.ParseFloat(s, 64)
		j.Total += v
		switch i {
		case 3, 4, 7: // idle, iowait, steal
		case 5, 6:
			j.IRQ += v
			j.Busy += v
		default:
			j.Busy += v
		}
	}
	return j
}

// Cores converts d, a difference of jiffies taken while Total went from
// total0 to total1, into cores of this machine; 0 when Total did not move.
func Cores(d, total0, total1 float64) float64 {
	if total1 <= total0 {
		return 0
	}
	return float64(runtime.NumCPU()) * d / (total1 - total0)
}
