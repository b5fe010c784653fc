package main

import (
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/capsem/capsem/bench/internal/cpu"
	"github.com/capsem/capsem/bench/internal/upstream"
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
// the client (cmd itself: ip netns exec execs it in place), the path's
// proxy (capsemPID: capsem-net, or mitmdump, counted in the capsem
// column), this process (the frame pump), the upstream up, and the whole
// machine.
func (b *bench) measureCPU(cmd *exec.Cmd, capsemPID int, up *upstream.Process) (cpuUse, error) {
	upPID, self := up.PID(), os.Getpid()
	c0, u0, s0 := cpu.ProcSeconds(capsemPID), cpu.ProcSeconds(upPID), cpu.ProcSeconds(self)
	j0 := cpu.Machine()
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0).Seconds()
	c1, u1, s1 := cpu.ProcSeconds(capsemPID), cpu.ProcSeconds(upPID), cpu.ProcSeconds(self)
	j1 := cpu.Machine()
	if err != nil {
		return cpuUse{}, err
	}
	var use cpuUse
	if ps := cmd.ProcessState; ps != nil {
		use.client = (ps.UserTime() + ps.SystemTime()).Seconds() / wall
	}
	use.capsem, use.upstream, use.pump = (c1-c0)/wall, (u1-u0)/wall, (s1-s0)/wall
	use.machine = cpu.Cores(j1.Busy-j0.Busy, j0.Total, j1.Total)
	use.kernel = cpu.Cores(j1.IRQ-j0.IRQ, j0.Total, j1.Total)
	use.other = max(0, use.machine-use.client-use.capsem-use.pump-use.upstream-use.kernel)
	return use, nil
}
