package boot

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// FindPort returns the device of the virtio-serial port called name, by
// reading sysRoot/class/virtio-ports/*/name (e.g. vport0p1 → devRoot/vport0p1).
func FindPort(sysRoot, devRoot, name string) (string, error) {
	names, _ := filepath.Glob(filepath.Join(sysRoot, "class/virtio-ports/*/name"))
	sort.Strings(names)
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil || string(bytes.TrimSpace(b)) != name {
			continue
		}
		dev := filepath.Join(devRoot, filepath.Base(filepath.Dir(n)))
		if _, err := os.Stat(dev); err != nil {
			return "", fmt.Errorf("virtio-serial port %q is %s, which does not exist yet", name, dev)
		}
		return dev, nil
	}
	return "", fmt.Errorf("no virtio-serial port named %q (is virtio_console in the module list, and does the VM have -device virtserialport,name=%s?)", name, name)
}

// WaitPort waits up to timeout for FindPort to succeed.
func WaitPort(sysRoot, devRoot, name string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		dev, err := FindPort(sysRoot, devRoot, name)
		if err == nil || time.Now().After(deadline) {
			return dev, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}
