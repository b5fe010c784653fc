package vz

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/capsem/capsem/guest/bootparam"
	"github.com/capsem/capsem/hypervisor"
)

func TestKernelCmdline(t *testing.T) {
	cfg := &hypervisor.Config{
		Kernel:    "/k/Image",
		Initramfs: "/k/initrd",
		RootImage: "/img/root.erofs",
		Workspace: "/home/u/proj",
		// capsem.ws=9p as a caller might set it for qemu, and another tag:
		// vz writes its own (the tag the share has is the default).
		Boot: bootparam.BootParams{IP: netip.MustParsePrefix("198.18.0.2/24"), WSFS: "9p", WSTag: "other"},
	}
	got := kernelCmdline(cfg, 1024)
	want := "console=ttyS0 panic=-1 quiet loglevel=1 mitigations=off no_timer_check audit=0 8250.nr_uarts=1 random.trust_cpu=on" +
		" console=hvc0 capsem.root=/dev/vda capsem.ip=198.18.0.2/24 capsem.ws=virtiofs capsem.vsock=1024"
	if got != want {
		t.Fatalf("cmdline:\n got %s\nwant %s", got, want)
	}

	short := kernelCmdline(&hypervisor.Config{Kernel: "/k", RootImage: "/r"}, 7)
	if !strings.HasSuffix(short, " console=hvc0 root=/dev/vda ro capsem.vsock=7") {
		t.Fatalf("no initramfs, no workspace: %s", short)
	}
	if strings.Contains(short, "capsem.ws") || strings.Contains(short, "tsc_early_khz") {
		t.Fatalf("minimal cmdline: %s", short)
	}
}
