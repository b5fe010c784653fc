package supervisor

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
)

// StopGrace is how long a stop waits for the supervisor to power the
// guest off and record the session: the agent's shutdown takes 5 s at
// most before the VM is stopped, the session's flush and move a few more.
const StopGrace = 30 * time.Second

// Stop asks sandbox d's supervisor to stop and waits until it gave its
// lock back; kill then kills a supervisor that does not (rm --force).
func Stop(ctx context.Context, d home.Dir, kill bool) error {
	client := api.NewClient(d.SocketPath())
	defer client.Close()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := client.Stop(sctx)
	cancel()
	if err != nil && !kill {
		return fmt.Errorf("sandbox %s: the supervisor did not take the stop (%v); its log: %s", d.Name, err, d.Log())
	}
	deadline := time.Now().Add(StopGrace)
	if err != nil {
		deadline = time.Now()
	}
	for d.Locked() {
		if time.Now().After(deadline) {
			if !kill {
				return fmt.Errorf("sandbox %s did not stop within %s; its log: %s (capsem rm --force %s kills it)", d.Name, StopGrace, d.Log(), d.Name)
			}
			if l, ok := d.ReadLaunch(); ok && l.PID > 0 {
				_ = syscall.Kill(l.PID, syscall.SIGKILL) // QEMU dies with it
			}
			for i := 0; d.Locked() && i < 100; i++ {
				time.Sleep(50 * time.Millisecond)
			}
			if d.Locked() {
				return fmt.Errorf("sandbox %s: its supervisor holds on after SIGKILL", d.Name)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
