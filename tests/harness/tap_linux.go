package harness

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// openTAPIn creates TAP device dev inside namespace ns and returns its file,
// usable from this process's own namespace.
func openTAPIn(ns, dev string) (*os.File, error) {
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer unix.Close(orig)
	target, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("setns %s: %w", ns, err)
	}
	fd, openErr := openTAP(dev)
	if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
		// This thread is stuck in the wrong namespace: leave it locked so
		// the runtime retires it with the goroutine.
		return nil, fmt.Errorf("setns back: %w", err)
	}
	runtime.UnlockOSThread()
	if openErr != nil {
		return nil, openErr
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+dev), nil
}

func openTAP(dev string) (int, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	ifr, err := unix.NewIfreq(dev)
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("TUNSETIFF %s: %w", dev, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}
