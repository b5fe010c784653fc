package qemu

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/capsem/capsem/guest/arch"
)

// Accel is the accelerator a VM runs under and why it was chosen.
type Accel struct {
	// Name is "kvm" or "tcg".
	Name string
	// Reason says why, for the log line.
	Reason string
}

// KVM reports whether the accelerator is hardware KVM.
func (a Accel) KVM() bool { return a.Name == "kvm" }

func (a Accel) qemuArg() string {
	if a.KVM() {
		return "kvm"
	}
	// Multi-threaded TCG: one host thread per vCPU.
	return "tcg,thread=multi"
}

// probePaths are the files the accelerator probe reads; tests point them
// at fakes.
type probePaths struct {
	cpuinfo string // /proc/cpuinfo
	pvm     string // /sys/module/kvm_pvm: present when /dev/kvm is PVM
	devKVM  string // /dev/kvm
}

var hostPaths = probePaths{
	cpuinfo: "/proc/cpuinfo",
	pvm:     "/sys/module/kvm_pvm",
	devKVM:  "/dev/kvm",
}

// probeAccel picks KVM for a guest of architecture guest only when it is
// the host's, and on x86-64 only when the CPU advertises hardware
// virtualisation (vmx or svm) and /dev/kvm is not the PVM flavour (stock
// kernels do not boot under it); and /dev/kvm must open read-write.
// Anything else is TCG, with the reason.
func probeAccel(p probePaths, host, guest arch.Arch) Accel {
	tcg := func(why string) Accel { return Accel{Name: "tcg", Reason: why} }
	if guest != host {
		return tcg(fmt.Sprintf("the guest is %s and the host %s: emulated", guest, host))
	}
	if host == arch.AMD64 {
		info, err := os.ReadFile(p.cpuinfo)
		if err != nil {
			return tcg(fmt.Sprintf("cannot read %s: %v", p.cpuinfo, err))
		}
		if !cpuHasVirt(info) {
			return tcg("the CPU has no vmx/svm flag (nested or paravirtual host)")
		}
		if _, err := os.Stat(p.pvm); err == nil {
			return tcg(p.pvm + " is loaded: " + p.devKVM + " is PVM, not hardware KVM")
		}
	}
	f, err := os.OpenFile(p.devKVM, os.O_RDWR, 0)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return tcg(p.devKVM + " does not exist (kvm_intel/kvm_amd not loaded?)")
		case errors.Is(err, fs.ErrPermission):
			return tcg(p.devKVM + " is not read-write for this user (add it to the kvm group)")
		}
		return tcg(fmt.Sprintf("cannot open %s: %v", p.devKVM, err))
	}
	f.Close()
	if host == arch.AMD64 {
		return Accel{Name: "kvm", Reason: "vmx/svm present and " + p.devKVM + " opens read-write"}
	}
	return Accel{Name: "kvm", Reason: p.devKVM + " opens read-write"}
}

// cpuHasVirt reports whether any "flags" line of /proc/cpuinfo lists vmx
// or svm.
func cpuHasVirt(cpuinfo []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(k) != "flags" {
			continue
		}
		for _, f := range strings.Fields(v) {
			if f == "vmx" || f == "svm" {
				return true
			}
		}
	}
	return false
}

// tscPaths are where the host TSC frequency is read from.
type tscPaths struct {
	sysfs   string // /sys/devices/system/cpu/cpu0/tsc_freq_khz (some kernels)
	cpuinfo string // /proc/cpuinfo, "cpu MHz"
}

var hostTSCPaths = tscPaths{
	sysfs:   "/sys/devices/system/cpu/cpu0/tsc_freq_khz",
	cpuinfo: "/proc/cpuinfo",
}

// hostTSCKHz is the host's TSC frequency in kHz, 0 if unknown. Under TCG
// the guest's TSC ticks at the host's rate, so this is what the guest's
// tsc_early_khz should say.
func hostTSCKHz(p tscPaths) int {
	if b, err := os.ReadFile(p.sysfs); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v > 0 {
			return v
		}
	}
	b, err := os.ReadFile(p.cpuinfo)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(k) != "cpu MHz" {
			continue
		}
		mhz, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || mhz <= 0 || mhz > 100000 {
			return 0
		}
		return int(math.Round(mhz * 1000))
	}
	return 0
}

// ProbeAccel is the accelerator a VM of architecture a started now would
// get, and why (for `capsem doctor --host`).
func ProbeAccel(a arch.Arch) Accel { return probeAccel(hostPaths, arch.Host(), a) }
