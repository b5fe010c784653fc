package boot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Sysctl is one /proc/sys setting.
type Sysctl struct {
	Key, Value string
	// IfPresent: a key the kernel does not have (IPv6 not built, an older
	// kernel) is skipped, not an error.
	IfPresent bool
}

func (s Sysctl) String() string { return s.Key + "=" + s.Value }

// EarlySysctls are set before any network interface comes up: no IPv6
// (capsem drops it anyway; this keeps the guest from even trying), and
// inotify limits large enough for a workspace of a big repository.
func EarlySysctls() []Sysctl {
	return []Sysctl{
		{Key: "net.ipv6.conf.all.disable_ipv6", Value: "1", IfPresent: true},
		{Key: "net.ipv6.conf.default.disable_ipv6", Value: "1", IfPresent: true},
		{Key: "fs.inotify.max_user_watches", Value: "524288", IfPresent: true},
		{Key: "fs.inotify.max_queued_events", Value: "65536", IfPresent: true},
	}
}

// LockdownSysctls are set once the guest is up: no more kernel modules
// (last, after every module the boot needed), no kernel pointers or kernel
// log for the sandboxed programs, no kexec, and IPv6 off on every
// interface that exists by now.
func LockdownSysctls() []Sysctl {
	return []Sysctl{
		{Key: "kernel.kptr_restrict", Value: "2"},
		{Key: "kernel.dmesg_restrict", Value: "1"},
		{Key: "kernel.kexec_load_disabled", Value: "1", IfPresent: true},
		{Key: "net.ipv6.conf.all.disable_ipv6", Value: "1", IfPresent: true},
		{Key: "net.ipv6.conf.default.disable_ipv6", Value: "1", IfPresent: true},
		{Key: "kernel.modules_disabled", Value: "1"},
	}
}

// ApplySysctls writes each setting under procSys (/proc/sys), in order,
// and returns those applied. It stops at the first failure of a required
// setting: lockdown is all or an error.
func ApplySysctls(procSys string, list []Sysctl) ([]string, error) {
	var applied []string
	for _, s := range list {
		p := filepath.Join(procSys, strings.ReplaceAll(s.Key, ".", "/"))
		err := writeExisting(p, s.Value+"\n")
		if err != nil {
			if s.IfPresent && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return applied, fmt.Errorf("sysctl %s: %w", s, err)
		}
		applied = append(applied, s.String())
	}
	return applied, nil
}

// writeExisting writes to a file that must already exist (a sysctl).
func writeExisting(p, data string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ParseSwaps returns the swap areas listed in /proc/swaps.
func ParseSwaps(data []byte) []string {
	var out []string
	for i, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) == 0 {
			continue // header
		}
		out = append(out, strings.ReplaceAll(f[0], `\040`, " "))
	}
	return out
}
