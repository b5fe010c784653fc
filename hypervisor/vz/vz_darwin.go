//go:build darwin && vz

package vz

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"

	vzf "github.com/Code-Hex/vz/v3"

	"github.com/capsem/capsem/guest/bootparam"
	"github.com/capsem/capsem/hypervisor"
)

// New checks cfg (and, on Apple silicon, that the kernel is an
// uncompressed arm64 Image). Nothing touches the framework until Start.
func New(cfg hypervisor.Config, opts Options) (*VM, error) {
	if os.Geteuid() == 0 {
		// The framework's virtio-fs server writes guest files with this
		// process's identity: as root, a guest could leave root-owned
		// and device files in the workspace (workspace.go).
		return nil, errors.New("vz: refusing to run a guest as root: run capsem as the user who owns the workspace")
	}
	v, err := newVM(cfg, opts)
	if err != nil {
		return nil, err
	}
	if err := checkKernel(v.cfg.Kernel, runtime.GOARCH); err != nil {
		return nil, err
	}
	v.build = func() (machine, error) { return buildMachine(&v.cfg, &v.opts, v.cmdline) }
	return v, nil
}

// vzMachine is a framework VM and the files it uses: the framework wraps
// file descriptors in NSFileHandles without duplicating them or taking
// ownership, so they stay open here until the VM has stopped.
type vzMachine struct {
	vm    *vzf.VirtualMachine
	port  uint32
	files []*os.File

	sockOnce sync.Once
	sock     *vzf.VirtioSocketDevice
	sockErr  error

	releaseOnce sync.Once
}

// buildMachine configures a framework VM for cfg. The configuration mirrors
// the qemu backend's: Linux boot loader, virtio console to the log, root
// image read-only as the only block device (/dev/vda), one virtio-net NIC
// on cfg.NIC, the workspace over virtio-fs, plus a virtio-vsock device for
// the control channel and a virtio-rng device.
func buildMachine(cfg *hypervisor.Config, opts *Options, cmdline string) (_ machine, err error) {
	m := &vzMachine{port: opts.ControlPort}
	defer func() {
		if err != nil {
			m.release()
		}
	}()
	wrap := func(what string, err error) error { return fmt.Errorf("vz: %s: %w", what, err) }

	if n, lo, hi := uint(cfg.CPUs), vzf.VirtualMachineConfigurationMinimumAllowedCPUCount(), vzf.VirtualMachineConfigurationMaximumAllowedCPUCount(); n < lo || n > hi {
		return nil, fmt.Errorf("vz: %d CPUs: this Mac allows %d..%d", n, lo, hi)
	}
	mem := uint64(cfg.MemoryMiB) << 20
	if lo, hi := vzf.VirtualMachineConfigurationMinimumAllowedMemorySize(), vzf.VirtualMachineConfigurationMaximumAllowedMemorySize(); mem < lo || mem > hi {
		return nil, fmt.Errorf("vz: %d MiB of memory: this Mac allows %d..%d MiB", cfg.MemoryMiB, lo>>20, hi>>20)
	}

	bootOpts := []vzf.LinuxBootLoaderOption{vzf.WithCommandLine(cmdline)}
	if cfg.Initramfs != "" {
		bootOpts = append(bootOpts, vzf.WithInitrd(cfg.Initramfs))
	}
	boot, err := vzf.NewLinuxBootLoader(cfg.Kernel, bootOpts...)
	if err != nil {
		return nil, wrap("boot loader", err)
	}
	conf, err := vzf.NewVirtualMachineConfiguration(boot, uint(cfg.CPUs), mem)
	if err != nil {
		return nil, wrap("configuration", err)
	}

	// Console (hvc0): the guest's output to the log (truncated: each boot
	// gets a fresh one) or /dev/null; its input is a pipe nobody writes
	// to, so the guest reads nothing but never sees end-of-file either.
	in, inW, err := os.Pipe()
	if err != nil {
		return nil, wrap("console", err)
	}
	m.files = append(m.files, in, inW)
	var out *os.File
	if cfg.ConsoleLog != "" {
		// Through a pipe into a capped log (hypervisor.ConsoleLog): a guest
		// writing to hvc0 without end must not fill the disk.
		log, lerr := hypervisor.CreateConsoleLog(cfg.ConsoleLog, cfg.ConsoleLogMax)
		if lerr != nil {
			return nil, wrap("console log", lerr)
		}
		var pr *os.File
		if pr, out, err = os.Pipe(); err != nil {
			log.Close()
			return nil, wrap("console log", err)
		}
		go func() {
			log.Copy(pr) // until the framework closes its end at release
			pr.Close()
		}()
	} else {
		out, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	}
	if err != nil {
		return nil, wrap("console log", err)
	}
	m.files = append(m.files, out)
	serialAtt, err := vzf.NewFileHandleSerialPortAttachment(in, out)
	if err != nil {
		return nil, wrap("console", err)
	}
	serial, err := vzf.NewVirtioConsoleDeviceSerialPortConfiguration(serialAtt)
	if err != nil {
		return nil, wrap("console", err)
	}
	conf.SetSerialPortsVirtualMachineConfiguration([]*vzf.VirtioConsoleDeviceSerialPortConfiguration{serial})

	entropy, err := vzf.NewVirtioEntropyDeviceConfiguration()
	if err != nil {
		return nil, wrap("entropy device", err)
	}
	conf.SetEntropyDevicesVirtualMachineConfiguration([]*vzf.VirtioEntropyDeviceConfiguration{entropy})

	// The root image first, the data disk second, the transfer disk
	// third: the order hypervisor names them in.
	var disks []vzf.StorageDeviceConfiguration
	for _, d := range []struct {
		what, path string
		readOnly   bool
	}{{"root image", cfg.RootImage, true}, {"data disk", cfg.DataDisk, false}, {"transfer disk", cfg.TransferDisk, false}} {
		if d.path == "" {
			continue
		}
		diskAtt, err := vzf.NewDiskImageStorageDeviceAttachment(d.path, d.readOnly)
		if err != nil {
			return nil, wrap(d.what+" "+d.path, err)
		}
		disk, err := vzf.NewVirtioBlockDeviceConfiguration(diskAtt)
		if err != nil {
			return nil, wrap(d.what, err)
		}
		disks = append(disks, disk)
	}
	if len(disks) > 0 {
		conf.SetStorageDevicesVirtualMachineConfiguration(disks)
	}

	if cfg.NIC != nil {
		nic, err := dupFile(cfg.NIC, "nic")
		if err != nil {
			return nil, wrap("NIC", err)
		}
		m.files = append(m.files, nic)
		// Fails unless nic is a connected SOCK_DGRAM socket (DatagramPair).
		nicAtt, err := vzf.NewFileHandleNetworkDeviceAttachment(nic)
		if err != nil {
			return nil, wrap("NIC (Config.NIC must come from vz.DatagramPair)", err)
		}
		if opts.MTU > 1500 {
			if err := nicAtt.SetMaximumTransmissionUnit(opts.MTU); err != nil {
				return nil, wrap(fmt.Sprintf("NIC MTU %d", opts.MTU), err)
			}
		}
		netDev, err := vzf.NewVirtioNetworkDeviceConfiguration(nicAtt)
		if err != nil {
			return nil, wrap("NIC", err)
		}
		hw, err := net.ParseMAC(cfg.MAC)
		if err != nil {
			return nil, wrap("NIC MAC", err)
		}
		mac, err := vzf.NewMACAddress(hw)
		if err != nil {
			return nil, wrap("NIC MAC", err)
		}
		netDev.SetMACAddress(mac)
		conf.SetNetworkDevicesVirtualMachineConfiguration([]*vzf.VirtioNetworkDeviceConfiguration{netDev})
	}

	if cfg.Workspace != "" {
		fsDev, err := vzf.NewVirtioFileSystemDeviceConfiguration(bootparam.WorkspaceTag)
		if err != nil {
			return nil, wrap("workspace", err)
		}
		dir, err := vzf.NewSharedDirectory(cfg.Workspace, cfg.WorkspaceReadOnly)
		if err != nil {
			return nil, wrap("workspace "+cfg.Workspace, err)
		}
		share, err := vzf.NewSingleDirectoryShare(dir)
		if err != nil {
			return nil, wrap("workspace", err)
		}
		fsDev.SetDirectoryShare(share)
		conf.SetDirectorySharingDevicesVirtualMachineConfiguration([]vzf.DirectorySharingDeviceConfiguration{fsDev})
	}

	sock, err := vzf.NewVirtioSocketDeviceConfiguration()
	if err != nil {
		return nil, wrap("vsock device", err)
	}
	conf.SetSocketDevicesVirtualMachineConfiguration([]vzf.SocketDeviceConfiguration{sock})

	ok, err := conf.Validate()
	if err != nil {
		return nil, fmt.Errorf("vz: invalid VM configuration: %w (is the binary signed with the com.apple.security.virtualization entitlement? codesign --entitlements hypervisor/vz/vz.entitlements -s - BINARY)", err)
	}
	if !ok {
		return nil, errors.New("vz: the framework rejected the VM configuration without saying why")
	}
	vm, err := vzf.NewVirtualMachine(conf)
	if err != nil {
		return nil, wrap("create the VM", err)
	}
	m.vm = vm
	return m, nil
}

// dupFile duplicates f's descriptor, close-on-exec, so the caller may close
// its copy after Start.
func dupFile(f *os.File, name string) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nfd int
	var derr error
	syscall.ForkLock.RLock()
	err = rc.Control(func(fd uintptr) {
		nfd, derr = syscall.Dup(int(fd))
		if derr == nil {
			syscall.CloseOnExec(nfd)
		}
	})
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("dup: %w", derr)
	}
	return os.NewFile(uintptr(nfd), name), nil
}

func (m *vzMachine) start() error { return m.vm.Start() }

func (m *vzMachine) pause() error {
	if !m.vm.CanPause() {
		return fmt.Errorf("the VM cannot be paused in state %v", m.vm.State())
	}
	return m.vm.Pause()
}

func (m *vzMachine) resume() error {
	if !m.vm.CanResume() {
		return fmt.Errorf("the VM cannot be resumed in state %v", m.vm.State())
	}
	return m.vm.Resume()
}

// macOSVersion is the running macOS's product version ("14.4.1").
func macOSVersion() (string, error) {
	v, err := syscall.Sysctl("kern.osproductversion")
	if err != nil {
		return "", fmt.Errorf("sysctl kern.osproductversion: %w", err)
	}
	return v, nil
}

func (m *vzMachine) wait() error {
	// The notifications are buffered from NewVirtualMachine on (Starting,
	// Running, …); there is none for the initial Stopped state.
	for st := range m.vm.StateChangedNotify() {
		switch st {
		case vzf.VirtualMachineStateStopped:
			return nil
		case vzf.VirtualMachineStateError:
			return errors.New("the Virtualization framework reports the VM in its error state")
		}
	}
	return errors.New("the Virtualization framework stopped reporting the VM's state")
}

func (m *vzMachine) requestStop() error {
	if !m.vm.CanRequestStop() {
		return fmt.Errorf("the VM cannot be asked to stop in state %v", m.vm.State())
	}
	ok, err := m.vm.RequestStop()
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("the framework did not deliver the stop request")
	}
	return nil
}

func (m *vzMachine) forceStop() error {
	if m.vm.State() == vzf.VirtualMachineStateStopped {
		return nil
	}
	return m.vm.Stop() // macOS 12 and later
}

func (m *vzMachine) dialControl() (net.Conn, error) {
	m.sockOnce.Do(func() {
		devs := m.vm.SocketDevices()
		if len(devs) == 0 {
			m.sockErr = errors.New("the VM has no virtio-vsock device")
			return
		}
		m.sock = devs[0]
	})
	if m.sockErr != nil {
		return nil, m.sockErr
	}
	conn, err := m.sock.Connect(m.port)
	if err != nil {
		return nil, err
	}
	if conn == nil {
		return nil, fmt.Errorf("vsock connect to port %d returned no connection", m.port)
	}
	return conn, nil
}

func (m *vzMachine) release() {
	m.releaseOnce.Do(func() {
		for _, f := range m.files {
			f.Close()
		}
		m.files = nil
	})
}
