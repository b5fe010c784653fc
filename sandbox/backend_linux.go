package sandbox

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/capsem/capsem/guest/arch"
	"github.com/capsem/capsem/hypervisor"
	"github.com/capsem/capsem/hypervisor/qemu"
	"github.com/capsem/capsem/netstack"
)

// CheckHypervisor fails with the command that fixes it when a guest of
// architecture a cannot be started on this machine.
func CheckHypervisor(a arch.Arch) error {
	_, err := qemu.FindBinary(a)
	if err != nil {
		task := "deps"
		if a.Foreign() {
			task = "deps:" + a.String()
		}
		return fmt.Errorf("%w\n  fix: go tool task %s   (or: apt-get install %s)", err, task, a.QEMUSystemPackage())
	}
	return nil
}

// newNIC returns the netstack's end and the VM's end of the guest NIC: a
// stream socketpair carrying QEMU's length-prefixed frames.
func newNIC() (netstack.FrameConn, *os.File, error) {
	host, vm, err := hypervisor.SocketPair()
	if err != nil {
		return nil, nil, err
	}
	return netstack.NewStreamConn(host), vm, nil
}

// newVM creates the qemu backend's VM for cfg. It tells the user, once,
// when /dev/kvm is there but not usable by them (the guest then runs under
// TCG, several times slower).
func newVM(cfg hypervisor.Config, log *slog.Logger) (hypervisor.VM, error) {
	vm, err := qemu.New(cfg, qemu.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	if a := vm.Accel(); !a.KVM() && strings.Contains(a.Reason, "not read-write") {
		log.Warn("running under TCG: " + a.Reason + "; fix: sudo usermod -aG kvm $USER, then log in again")
	}
	return vm, nil
}
