//go:build !linux

package qemu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/capsem/capsem/guest/arch"
	"github.com/capsem/capsem/hypervisor"
)

var errUnsupported = fmt.Errorf("qemu backend: not supported on %s (use the vz backend on macOS)", runtime.GOOS)

// VM is the Linux QEMU backend; on this OS New always fails.
type VM struct{}

var _ hypervisor.VM = (*VM)(nil)

// New fails: the QEMU backend is Linux-only.
func New(hypervisor.Config, Options) (*VM, error) { return nil, errUnsupported }

// FindBinary fails: the QEMU backend is Linux-only.
func FindBinary(arch.Arch) (string, error) { return "", errUnsupported }

func (*VM) Start(context.Context) error { return errUnsupported }
func (*VM) Wait() error                 { return errUnsupported }
func (*VM) Stop(context.Context) error  { return errors.New("qemu: VM not started") }
func (*VM) Control() io.ReadWriteCloser { return nil }
func (*VM) Console() string             { return "" }
