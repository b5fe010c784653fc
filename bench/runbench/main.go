//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/capsem/capsem/bench/internal/stats"
	"github.com/capsem/capsem/guest/bootparam"
	"github.com/capsem/capsem/guest/image"
	"github.com/capsem/capsem/hypervisor"
	"github.com/capsem/capsem/hypervisor/qemu"
)

var (
	flagN      = flag.Int("n", 10, "runs of each")
	flagCapsem = flag.String("capsem", "bin/capsem", "the capsem binary (capsem-agent next to it)")
	flagCPUs   = flag.Int("cpus", 2, "vCPUs for both")
	flagMemory = flag.Int("memory", 2048, "guest MiB for both")
)

func main() {
	flag.Parse()
	capsem, err := filepath.Abs(*flagCapsem)
	if err != nil {
		fatal(err)
	}
	agent := filepath.Join(filepath.Dir(capsem), "capsem-agent")
	cache, err := image.DefaultCache()
	if err != nil {
		fatal(err)
	}
	g, ok, err := cache.FindDefault(agent, "")
	if err != nil {
		fatal(err)
	}
	if !ok {
		fatal(fmt.Errorf("the default guest for %s is not built: run %s image build first", agent, capsem))
	}
	work, err := os.MkdirTemp("", "runbench")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(work)

	// One of each first, not counted: page cache and CA creation.
	if _, err := bareBoot(g, work); err != nil {
		fatal(err)
	}
	if _, err := capsemTrue(capsem, work); err != nil {
		fatal(err)
	}
	var bare, run []time.Duration
	for i := 0; i < *flagN; i++ {
		d, err := bareBoot(g, work)
		if err != nil {
			fatal(err)
		}
		bare = append(bare, d)
		d, err = capsemTrue(capsem, work)
		if err != nil {
			fatal(err)
		}
		run = append(run, d)
		fmt.Fprintf(os.Stderr, "run %d: bare boot %v, capsem run -- true %v\n", i+1, bare[i].Round(time.Millisecond), run[i].Round(time.Millisecond))
	}
	mb, mr := stats.Median(bare), stats.Median(run)
	accel := "TCG"
	if vm, err := qemu.New(hypervisor.Config{Kernel: g.Kernel}, qemu.Options{Logger: quiet()}); err == nil && vm.Accel().KVM() {
		accel = "KVM"
	}
	fmt.Printf("guest %s (kernel %s), %d vCPUs, %d MiB, %s, %d runs each, %d host CPUs\n\n", g.ID, g.KernelRelease, *flagCPUs, *flagMemory, accel, *flagN, runtime.NumCPU())
	fmt.Printf("| | median | min | max |\n|---|---|---|---|\n")
	fmt.Printf("| bare QEMU boot to the agent's first byte | %s | %s | %s |\n", ms(mb), ms(slices.Min(bare)), ms(slices.Max(bare)))
	fmt.Printf("| `capsem run --cold -- true` (whole command) | %s | %s | %s |\n", ms(mr), ms(slices.Min(run)), ms(slices.Max(run)))
	fmt.Printf("\ncapsem adds %+.1f%% over the bare boot (%s)\n", 100*(float64(mr)/float64(mb)-1), ms(mr-mb))
}

// bareBoot boots kernel + initramfs with nothing attached and returns the
// time from Start to the agent's first byte on the control channel.
func bareBoot(g *image.Guest, work string) (time.Duration, error) {
	vm, err := qemu.New(hypervisor.Config{
		Kernel:    g.Kernel,
		Initramfs: g.Initramfs,
		Boot:      bootparam.BootParams{NoNetwork: true},
		CPUs:      *flagCPUs,
		MemoryMiB: *flagMemory,
	}, qemu.Options{Logger: quiet()})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	if err := vm.Start(ctx); err != nil {
		return 0, err
	}
	defer vm.Stop(context.Background())
	select {
	case <-vm.Booted():
		return time.Since(start), nil
	case <-vm.Done():
		return 0, fmt.Errorf("bare boot: QEMU exited before the agent spoke: %v", vm.Wait())
	case <-ctx.Done():
		return 0, fmt.Errorf("bare boot: no word from the agent within 2 minutes")
	}
}

// capsemTrue times `capsem run --cold -- true` from exec to exit: the
// kernel booted, as the bare boot beside it is (the boot snapshot's run
// is bench:snapshot's).
func capsemTrue(capsem, work string) (time.Duration, error) {
	ws := filepath.Join(work, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return 0, err
	}
	cmd := exec.Command(capsem, "run", "--cold", "--data", filepath.Join(work, "data"), "--ca-dir", filepath.Join(work, "ca"),
		"--workspace", ws, "--cpus", fmt.Sprint(*flagCPUs), "--memory", fmt.Sprint(*flagMemory), "--", "true")
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("capsem run -- true: %v\n%s", err, stderr.String())
	}
	return d, nil
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "runbench:", err)
	os.Exit(1)
}
