package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// cpuUse is how many cores each party used during one measurement.
type cpuUse struct {
	client, capsem, pump, upstream float64
	kernel                         float64 // interrupts and softirqs (network processing outside any process's account)
	other                          float64 // the rest of the machine's busy time: other processes (interference)
	machine                        float64
}

func (c cpuUse) String() string {
	return fmt.Sprintf("[cores: client %.2f capsem-net %.2f pump %.2f upstream %.2f softirq %.2f other %.2f machine %.2f]", c.client, c.capsem, c.pump, c.upstream, c.kernel, c.other, c.machine)
}

// measureCPU runs cmd and returns the cores each party used meanwhile:
// the client (cmd itself: ip netns exec execs it in place), e's
// capsem-net, this process (the frame pump), the upstream, and the whole
// machine.
func (b *bench) measureCPU(cmd *exec.Cmd, e *env) (cpuUse, error) {
	capsemPID := 0
	if e != nil {
		capsemPID = e.cmd.Process.Pid
	}
	upPID, self := b.upstream.Process.Pid, os.Getpid()
	c0, u0, s0 := procCPU(capsemPID), procCPU(upPID), procCPU(self)
	j0 := machineCPU()
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0).Seconds()
	c1, u1, s1 := procCPU(capsemPID), procCPU(upPID), procCPU(self)
	j1 := machineCPU()
	if err != nil {
		return cpuUse{}, err
	}
	var use cpuUse
	if ps := cmd.ProcessState; ps != nil {
		use.client = (ps.UserTime() + ps.SystemTime()).Seconds() / wall
	}
	use.capsem, use.upstream, use.pump = (c1-c0)/wall, (u1-u0)/wall, (s1-s0)/wall
	use.machine = cores(j1.busy-j0.busy, j0.total, j1.total)
	use.kernel = cores(j1.irq-j0.irq, j0.total, j1.total)
	use.other = max(0, use.machine-use.client-use.capsem-use.pump-use.upstream-use.kernel)
	return use, nil
}

const clockTicks = 100 // USER_HZ on Linux

// procCPU is a process's user+system CPU seconds so far.
func procCPU(pid int) float64 {
	if pid == 0 {
		return 0
	}
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

// jiffies are the machine's CPU counters from /proc/stat, all CPUs.
type jiffies struct{ busy, irq, total float64 }

func machineCPU() jiffies {
	var j jiffies
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return j
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	// user nice system idle iowait irq softirq steal (guest and guest_nice
	// are already in user and nice)
	for i, s := range f[1:min(len(f), 9)] {
		v, _ := strconv.ParseFloat(s, 64)
		j.total += v
		switch i {
		case 3, 4, 7: // idle, iowait, steal
		case 5, 6:
			j.irq += v
			j.busy += v
		default:
			j.busy += v
		}
	}
	return j
}

// cores converts a difference of jiffies into cores.
func cores(d, total0, total1 float64) float64 {
	if total1 <= total0 {
		return 0
	}
	return float64(runtime.NumCPU()) * d / (total1 - total0)
}
