//go:build darwin && vz

package sandbox

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/capsem/capsem/guest/arch"
	"github.com/capsem/capsem/hypervisor"
	"github.com/capsem/capsem/hypervisor/vz"
	"github.com/capsem/capsem/netstack"
)

func CheckHypervisor(a arch.Arch) error {
	if a != arch.Host() {
		return fmt.Errorf("the Virtualization framework runs guests of the host's architecture (%s) only, not %s: leave out --arch", arch.Host(), a)
	}
	return nil
}

// newNIC returns the netstack's end and the VM's end of the guest NIC: a
// datagram socketpair, one Ethernet frame per datagram (vz's file-handle
// attachment).
func newNIC() (netstack.FrameConn, *os.File, error) {
	host, vm, err := vz.DatagramPair()
	if err != nil {
		return nil, nil, err
	}
	return netstack.NewDatagramConn(host), vm, nil
}

func newVM(cfg hypervisor.Config, log *slog.Logger) (hypervisor.VM, error) {
	return vz.New(cfg, vz.Options{Logger: log})
}
