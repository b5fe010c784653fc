//go:build darwin && vz

package vz

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"

	vzf "github.com/Code-Hex/vz/v3"

	"github.com/capsem/capsem/guest/arch"
	"github.com/capsem/capsem/hypervisor"
)

// New checks cfg and plans the VM (planFor: on Apple silicon the kernel
// must be an uncompressed arm64 Image, and capsem must not run as root).
// Nothing touches the framework until Start.
func New(cfg hypervisor.Config, opts Options) (*VM, error) {
	v, err := newVM(cfg, opts)
	if err != nil {
		return nil, err
	}
	if v.plan, err = planFor(&v.cfg, &v.opts, arch.Host(), os.Geteuid()); err != nil {
		return nil, err
	}
	v.build = func() (machine, error) { return buildMachine(&v.plan) }
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

// buildMachine makes the framework VM p describes, device by device in
// p's order: what the VM contains is decided in plan.go, and this only
// says it to the framework (and checks the CPUs and memory against this
// Mac's limits, which only the framework knows).
func buildMachine(p *Plan) (_ machine, err error) {
	m := &vzMachine{port: p.VsockPort}
	defer func() {
		if err != nil {
			m.release()
		}
	}()
	wrap := func(what string, err error) error { return fmt.Errorf("vz: %s: %w", what, err) }

	if n, lo, hi := uint(p.CPUs), vzf.VirtualMachineConfigurationMinimumAllowedCPUCount(), vzf.VirtualMachineConfigurationMaximumAllowedCPUCount(); n < lo || n > hi {
		return nil, fmt.Errorf("vz: %d CPUs: this Mac allows %d..%d", n, lo, hi)
	}
	if lo, hi := vzf.VirtualMachineConfigurationMinimumAllowedMemorySize(), vzf.VirtualMachineConfigurationMaximumAllowedMemorySize(); p.MemoryBytes < lo || p.MemoryBytes > hi {
		return nil, fmt.Errorf("vz: %d MiB of memory: this Mac allows %d..%d MiB", p.MemoryBytes>>20, lo>>20, hi>>20)
	}

	bootOpts := []vzf.LinuxBootLoaderOption{vzf.WithCommandLine(p.Boot.Cmdline)}
	if p.Boot.Initrd != "" {
		bootOpts = append(bootOpts, vzf.WithInitrd(p.Boot.Initrd))
	}
	boot, err := vzf.NewLinuxBootLoader(p.Boot.Kernel, bootOpts...)
	if err != nil {
		return nil, wrap("boot loader", err)
	}
	conf, err := vzf.NewVirtualMachineConfiguration(boot, uint(p.CPUs), p.MemoryBytes)
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
	if p.Console.Log != "" {
		// Through a pipe into a capped log (hypervisor.ConsoleLog): a guest
		// writing to hvc0 without end must not fill the disk.
		log, lerr := hypervisor.CreateConsoleLog(p.Console.Log, p.Console.Max)
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

	if p.Entropy {
		entropy, err := vzf.NewVirtioEntropyDeviceConfiguration()
		if err != nil {
			return nil, wrap("entropy device", err)
		}
		conf.SetEntropyDevicesVirtualMachineConfiguration([]*vzf.VirtioEntropyDeviceConfiguration{entropy})
	}

	var disks []vzf.StorageDeviceConfiguration
	for _, d := range p.Disks {
		diskAtt, err := vzf.NewDiskImageStorageDeviceAttachment(d.Path, d.ReadOnly)
		if err != nil {
			return nil, wrap(d.Name+" disk "+d.Path, err)
		}
		disk, err := vzf.NewVirtioBlockDeviceConfiguration(diskAtt)
		if err != nil {
			return nil, wrap(d.Name+" disk", err)
		}
		disks = append(disks, disk)
	}
	if len(disks) > 0 {
		conf.SetStorageDevicesVirtualMachineConfiguration(disks)
	}

	if n := p.NIC; n != nil {
		nic, err := dupFile(n.File, "nic")
		if err != nil {
			return nil, wrap("NIC", err)
		}
		m.files = append(m.files, nic)
		// Fails unless nic is a connected SOCK_DGRAM socket (DatagramPair).
		nicAtt, err := vzf.NewFileHandleNetworkDeviceAttachment(nic)
		if err != nil {
			return nil, wrap("NIC (Config.NIC must come from vz.DatagramPair)", err)
		}
		if n.MTU != 0 {
			if err := nicAtt.SetMaximumTransmissionUnit(n.MTU); err != nil {
				return nil, wrap(fmt.Sprintf("NIC MTU %d", n.MTU), err)
			}
		}
		netDev, err := vzf.NewVirtioNetworkDeviceConfiguration(nicAtt)
		if err != nil {
			return nil, wrap("NIC", err)
		}
		hw, err := net.ParseMAC(n.MAC) // planFor checked it
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

	if s := p.Workspace; s != nil {
		fsDev, err := vzf.NewVirtioFileSystemDeviceConfiguration(s.Tag)
		if err != nil {
			return nil, wrap("workspace", err)
		}
		dir, err := vzf.NewSharedDirectory(s.Dir, s.ReadOnly)
		if err != nil {
			return nil, wrap("workspace "+s.Dir, err)
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
