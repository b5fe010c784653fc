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
	grace := StopGrace
	if err != nil {
		grace = 0
	}
	if d.WaitUnlocked(grace) {
		return nil
	}
	if !kill {
		return fmt.Errorf("sandbox %s did not stop within %s; its log: %s (capsem rm --force %s kills it)", d.Name, StopGrace, d.Log(), d.Name)
	}
	if l, ok := d.ReadLaunch(); ok && l.PID > 0 {
		_ = syscall.Kill(l.PID, syscall.SIGKILL) // QEMU dies with it
	}
	if !d.WaitUnlocked(5 * time.Second) {
		return fmt.Errorf("sandbox %s: its supervisor holds on after SIGKILL", d.Name)
	}
	return nil
}
