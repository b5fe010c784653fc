package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/guest/arch"
	"github.com/capsem/capsem/guest/image"
	"github.com/capsem/capsem/hypervisor/qemu"
	"github.com/capsem/capsem/mitm/ca"
	"github.com/capsem/capsem/sandbox"
	"github.com/capsem/capsem/store"
)

// hostFinding is one line of `capsem doctor --host`.
type hostFinding struct {
	ok          bool
	what, found string
	fix         string // for a failure
}

// hostCheck checks what `capsem run` needs on this machine and says how to
// fix what is missing. Exit status 1 when something is.
func hostCheck(c *cli.Context) error {
	var fs []hostFinding
	add := func(ok bool, what, found, fix string) {
		fs = append(fs, hostFinding{ok: ok, what: what, found: found, fix: fix})
	}

	if runtime.GOOS == "linux" {
		if bin, err := qemu.FindBinary(""); err != nil {
			add(false, "qemu", err.Error(), "go tool task deps   (or: apt-get install qemu-system-x86)")
		} else {
			out, err := exec.Command(bin, "--version").Output()
			line, _, _ := strings.Cut(string(out), "\n")
			add(err == nil, "qemu", strings.TrimSpace(bin+": "+line), "reinstall QEMU: apt-get install --reinstall qemu-system-x86")
		}
		a := qemu.ProbeAccel(arch.Host())
		switch {
		case a.KVM():
			add(true, "accelerator", "KVM ("+a.Reason+")", "")
		case strings.Contains(a.Reason, "kvm_pvm"):
			add(true, "accelerator", "TCG: /dev/kvm is PVM, which stock kernels do not boot under ("+a.Reason+")", "")
		case strings.Contains(a.Reason, "not read-write"):
			add(false, "accelerator", "TCG although the CPU has hardware virtualisation: "+a.Reason, "sudo usermod -aG kvm $USER, then log in again")
		default:
			add(true, "accelerator", "TCG ("+a.Reason+")", "")
		}
	} else if err := sandbox.CheckHypervisor(arch.Host()); err != nil {
		add(false, "hypervisor", err.Error(), "see the README's capsem run section")
	}

	agent, err := findAgent(arch.Host())
	if err != nil {
		add(false, "agent", err.Error(), "go tool task build")
	} else if err := image.CheckStaticAgent(agent, ""); err != nil {
		add(false, "agent", err.Error(), "go tool task build")
	} else {
		add(true, "agent", agent, "")
		cache, err := image.DefaultCache()
		switch {
		case err != nil:
			add(false, "image", err.Error(), "set XDG_CACHE_HOME or HOME")
		default:
			g, ok, err := cache.FindDefault(agent, "")
			switch {
			case err != nil:
				add(false, "image", err.Error(), "capsem image build --force")
			case !ok:
				add(false, "image", "the default guest is not built (in "+cache.Root+")", "capsem image build   (or go tool task image; the first capsem run builds it too)")
			default:
				add(true, "image", fmt.Sprintf("default guest %s, kernel %s, %s", g.ID, g.KernelRelease, store.FormatSize(g.Size)), "")
			}
		}
	}

	caDir := c.String("ca-dir")
	if caDir == "" {
		caDir, _ = ca.DefaultDir()
	}
	if _, err := os.Stat(filepath.Join(caDir, ca.CertFile)); errors.Is(err, os.ErrNotExist) {
		add(true, "ca", "none yet in "+caDir+" (created on first use)", "")
	} else if a, err := ca.LoadOrCreate(caDir); err != nil {
		add(false, "ca", err.Error(), "capsem ca rotate   (makes a new CA; guests trust the new one from their next boot)")
	} else {
		add(true, "ca", a.CertPath()+" ("+a.Fingerprint()+")", "")
	}

	data := c.String("data")
	if err := checkWritable(data); err != nil {
		add(false, "store", err.Error(), "pass --data DIR with a writable directory, or fix the permissions of "+data)
	} else {
		add(true, "store", data+" is writable", "")
	}

	failed := 0
	for _, f := range fs {
		mark := "ok  "
		if !f.ok {
			mark = "FAIL"
			failed++
		}
		fmt.Fprintf(c.App.Writer, "%s %-12s %s\n", mark, f.what, f.found)
		if !f.ok && f.fix != "" {
			fmt.Fprintf(c.App.Writer, "     %-12s fix: %s\n", "", f.fix)
		}
	}
	if failed > 0 {
		return exitStatus(1)
	}
	return nil
}

// checkWritable creates dir if needed and a file in it.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".capsem-doctor-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
