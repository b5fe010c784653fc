//go:build !linux && !(darwin && vz)

package sandbox

import (
	"errors"
	"log/slog"
	"os"

	"github.com/capsem/capsem/guest/arch"
	"github.com/capsem/capsem/hypervisor"
	"github.com/capsem/capsem/netstack"
)

var errNoBackend = errors.New("capsem run needs QEMU on Linux, or on macOS a capsem built with the vz backend (go build -tags vz ./cmd/capsem)")

func CheckHypervisor(arch.Arch) error { return errNoBackend }

func newNIC() (netstack.FrameConn, *os.File, error) { return nil, nil, errNoBackend }

func newVM(hypervisor.Config, *slog.Logger) (hypervisor.VM, error) { return nil, errNoBackend }
