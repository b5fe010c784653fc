package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// load watches how busy the whole machine is during a measurement: the
// figures here are memory, which CPU contention moves little, but the
// soak's traffic runs late when the machine is saturated, and the report
// says so.
type load struct {
	busy0, total0 float64
	t0            time.Time
	stopc         chan struct{}
	done          chan loadAvgs
}

type loadAvgs struct{ mean, max float64 }

func startLoad() *load {
	l := &load{t0: time.Now(), stopc: make(chan struct{}), done: make(chan loadAvgs, 1)}
	l.busy0, l.total0 = cpuTimes()
	go func() {
		var sum, mx float64
		n := 0
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			la := loadAvg1()
			sum, mx, n = sum+la, max(mx, la), n+1
			select {
			case <-l.stopc:
				l.done <- loadAvgs{sum / float64(n), mx}
				return
			case <-t.C:
			}
		}
	}()
	return l
}

// stop says how busy the machine was since startLoad.
func (l *load) stop() string {
	busy, total := cpuTimes()
	close(l.stopc)
	la := <-l.done
	cores := 0.0
	if total > l.total0 {
		cores = (busy - l.busy0) / (total - l.total0) * float64(runtime.NumCPU())
	}
	return fmt.Sprintf("%.2f of %d cores busy on average over %s (everything on the machine, this benchmark included); 1-minute load average %.1f mean, %.1f max",
		cores, runtime.NumCPU(), time.Since(l.t0).Round(time.Second), la.mean, la.max)
}

// cpuTimes returns the machine's busy and total jiffies from /proc/stat.
func cpuTimes() (busy, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		if i >= 8 { // guest time is counted in user already
			break
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

func loadAvg1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// procCPU returns a process's user + system CPU time in seconds.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	// The command name is in parentheses and may hold spaces.
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}
