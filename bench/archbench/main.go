//go:build linux

package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/capsem/capsem/bench/internal/listflag"
	"github.com/capsem/capsem/bench/internal/stats"
	"github.com/capsem/capsem/guest/arch"
)

var (
	flagBuilds = flag.Int("builds", 1, "image builds of each architecture (minutes each)")
	flagRuns   = flag.Int("n", 5, "runs of each kind")
	flagCapsem = flag.String("capsem", "bin/capsem", "the capsem binary (its agents next to it)")
	flagSkip   = flag.String("skip", "", "comma-separated parts to leave out: build, run")
)

// buildTarget is the target: the arm64 build takes at most this
// many times the amd64 one.
const buildTarget = 2.0

func main() {
	flag.Parse()
	capsem, err := filepath.Abs(*flagCapsem)
	if err != nil {
		fatal(err)
	}
	archs := []arch.Arch{arch.AMD64, arch.ARM64}
	fmt.Printf("host %s/%s, %d CPUs\n\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if !listflag.Has(*flagSkip, "build") {
		builds := map[arch.Arch][]time.Duration{}
		for i := 0; i < *flagBuilds; i++ {
			for _, a := range archs { // alternated: machine noise hits both alike
				d, err := timed(capsem, "image", "build", "--arch", a.String(), "--force")
				if err != nil {
					fatal(err)
				}
				builds[a] = append(builds[a], d)
				fmt.Fprintf(os.Stderr, "build %d %s: %v\n", i+1, a, d.Round(time.Second))
			}
		}
		amd, arm := stats.Median(builds[arch.AMD64]), stats.Median(builds[arch.ARM64])
		ratio := float64(arm) / float64(amd)
		fmt.Printf("| image build from nothing (%d each) | amd64 | arm64 | arm64/amd64 | target |\n|---|---|---|---|---|\n", *flagBuilds)
		fmt.Printf("| `capsem image build --arch A --force` | %s | %s | %.2f× | ≤ %.0f× %s |\n\n", secs(amd), secs(arm), ratio, buildTarget, verdict(ratio <= buildTarget))
	}
	if !listflag.Has(*flagSkip, "run") {
		work, err := os.MkdirTemp("", "archbench")
		if err != nil {
			fatal(err)
		}
		defer os.RemoveAll(work)
		ws := filepath.Join(work, "ws")
		if err := os.MkdirAll(ws, 0o755); err != nil {
			fatal(err)
		}
		run := func(a arch.Arch, cold bool) (time.Duration, error) {
			args := []string{"run", "--arch", a.String(), "--data", filepath.Join(work, "data"), "--ca-dir", filepath.Join(work, "ca"), "--workspace", ws}
			if cold {
				args = append(args, "--cold")
			}
			return timed(capsem, append(args, "--", "true")...)
		}
		type kind struct {
			a    arch.Arch
			cold bool
		}
		times := map[kind][]time.Duration{}
		for _, a := range archs {
			// One of each first, not counted: it makes the boot snapshot.
			if _, err := run(a, false); err != nil {
				fatal(err)
			}
		}
		for i := 0; i < *flagRuns; i++ {
			for _, a := range archs {
				for _, cold := range []bool{false, true} {
					d, err := run(a, cold)
					if err != nil {
						fatal(err)
					}
					times[kind{a, cold}] = append(times[kind{a, cold}], d)
				}
			}
		}
		fmt.Printf("| `capsem run --arch A -- true` (median of %d; min–max) | amd64 | arm64 | arm64/amd64 |\n|---|---|---|---|\n", *flagRuns)
		for _, cold := range []bool{false, true} {
			name := "from the boot snapshot"
			if cold {
				name = "`--cold`: the kernel booted"
			}
			amd, arm := times[kind{arch.AMD64, cold}], times[kind{arch.ARM64, cold}]
			fmt.Printf("| %s | %s (%s–%s) | %s (%s–%s) | %.2f× |\n", name,
				ms(stats.Median(amd)), ms(slices.Min(amd)), ms(slices.Max(amd)),
				ms(stats.Median(arm)), ms(slices.Min(arm)), ms(slices.Max(arm)),
				float64(stats.Median(arm))/float64(stats.Median(amd)))
		}
	}
}

// timed runs capsem with args and returns its wall time.
func timed(capsem string, args ...string) (time.Duration, error) {
	cmd := exec.Command(capsem, args...)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("capsem %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return d, nil
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func secs(d time.Duration) string { return fmt.Sprintf("%.0f s", d.Seconds()) }
func ms(d time.Duration) string   { return fmt.Sprintf("%.2f s", d.Seconds()) }

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "archbench:", err)
	os.Exit(1)
}
