package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/capsem/capsem/guest/proto"
)

// bootInfoPath is where PID 1 leaves what the server needs to know.
const bootInfoPath = "/run/capsem/boot.json"

// bootInfo is what PID 1 hands the server: how to reach the host, where
// the workspace is, and the boot facts for Ready.
type bootInfo struct {
	// Managed: written by PID 1 of a capsem guest, so the server may set the
	// guest's clock from the host's Hello.
	Managed   bool        `json:"managed"`
	Debug     bool        `json:"debug,omitempty"`
	Port      string      `json:"port,omitempty"`  // virtio-serial port name or device path
	Vsock     uint32      `json:"vsock,omitempty"` // serve on vsock instead
	Workspace string      `json:"workspace,omitempty"`
	Root      string      `json:"root,omitempty"` // where trust stores live ("/" in a guest)
	CAEnv     []string    `json:"ca_env,omitempty"`
	Ready     proto.Ready `json:"ready"`
	// WSMount is the workspace's mount as boot did it, or left it to the
	// first Thaw (WSDefer, capsem.wsdefer=1): the server unmounts it for a
	// snapshot and mounts it again the same way.
	WSMount *mountSpec `json:"ws_mount,omitempty"`
	WSDefer bool       `json:"ws_defer,omitempty"`
}

// mountSpec is a mount(2) handed from PID 1 to the server (boot.Mount,
// which exists only on Linux).
type mountSpec struct {
	Source string  `json:"source"`
	Target string  `json:"target"`
	FSType string  `json:"fstype"`
	Flags  uintptr `json:"flags,omitempty"`
	Data   string  `json:"data,omitempty"`
}

func readBootInfo(path string) (bootInfo, error) {
	var bi bootInfo
	b, err := os.ReadFile(path)
	if err != nil {
		return bi, err
	}
	if err := json.Unmarshal(b, &bi); err != nil {
		return bi, fmt.Errorf("%s: %w", path, err)
	}
	return bi, nil
}

// readBootInfoFrom reads the boot facts PID 1 writes on f, up to its close.
// Nothing written means the boot failed.
func readBootInfoFrom(f *os.File) (bootInfo, error) {
	defer f.Close()
	var bi bootInfo
	b, err := io.ReadAll(f)
	if err != nil {
		return bi, fmt.Errorf("boot facts: %w", err)
	}
	if len(b) == 0 {
		return bi, errors.New("PID 1 closed the boot-facts pipe without writing them (the boot failed)")
	}
	if err := json.Unmarshal(b, &bi); err != nil {
		return bi, fmt.Errorf("boot facts: %w", err)
	}
	return bi, nil
}

func writeBootInfo(path string, bi bootInfo) ([]byte, error) {
	b, err := json.MarshalIndent(bi, "", "  ")
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	return b, os.WriteFile(path, b, 0o644)
}
