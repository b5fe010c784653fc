//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/capsem/capsem/bench/internal/stats"
	"github.com/capsem/capsem/sandbox/api"
)

var (
	flagCapsem = flag.String("capsem", "bin/capsem", "the capsem binary (capsem-agent next to it)")
	flagExecs  = flag.Int("execs", 200, "exec runs for p50/p99")
	flagRuns   = flag.Int("runs", 5, "capsem run -- true and stop/start cycles")
	flagFileMB = flag.Int("file-mib", 1024, "size of the file put, got and copied through 9p")
	flagPython = flag.String("python", "python3", "the Python for the client's figures (\"\": skip them)")
)

// bench is one run's scratch space.
type bench struct {
	capsem, data, ca, ws string
}

func main() {
	flag.Parse()
	capsem, err := filepath.Abs(*flagCapsem)
	if err != nil {
		fatal(err)
	}
	work, err := os.MkdirTemp("", "sandboxbench")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(work)
	b := &bench{capsem: capsem, data: filepath.Join(work, "data"), ca: filepath.Join(work, "ca"), ws: filepath.Join(work, "ws")}
	if err := os.MkdirAll(b.ws, 0o755); err != nil {
		fatal(err)
	}
	defer b.rmAll()

	// Warm-ups, not counted: the page cache, the CA, the image.
	if _, err := b.timed("run", "--data", b.data, "--ca-dir", b.ca, "--workspace", b.ws, "--", "true"); err != nil {
		fatal(err)
	}
	var run []time.Duration
	for range *flagRuns {
		d, err := b.timed("run", "--data", b.data, "--ca-dir", b.ca, "--workspace", b.ws, "--", "true")
		if err != nil {
			fatal(err)
		}
		run = append(run, d)
	}
	runMed := stats.Median(run)
	progress("capsem run -- true: median %v", runMed)

	if _, err := b.timed("start", "--data", b.data, "--ca-dir", b.ca, "--workspace", b.ws, "bench"); err != nil {
		fatal(err)
	}
	for range 5 { // warm the exec path
		if _, err := b.timed("exec", "--data", b.data, "bench", "--", "true"); err != nil {
			fatal(err)
		}
	}
	var cli []time.Duration
	for range *flagExecs {
		d, err := b.timed("exec", "--data", b.data, "bench", "--", "true")
		if err != nil {
			fatal(err)
		}
		cli = append(cli, d)
	}
	progress("capsem exec -- true: p50 %v", stats.Percentile(cli, 50))
	py, pyErr := b.pythonExecs(*flagExecs)
	if pyErr != nil {
		progress("python client: %v", pyErr)
	}

	st := b.status("bench")
	supRSS, qemuRSS := rssKiB(st.PID), qemuRSSKiB(filepath.Join(b.data, "sandboxes", "bench"))

	var starts []time.Duration
	for range *flagRuns {
		if _, err := b.timed("stop", "--data", b.data, "bench"); err != nil {
			fatal(err)
		}
		d, err := b.timed("start", "--data", b.data, "--ca-dir", b.ca, "bench")
		if err != nil {
			fatal(err)
		}
		starts = append(starts, d)
	}
	startMed := stats.Median(starts)
	progress("capsem start (stopped → answering): median %v", startMed)

	put, get, nineIn, nineOut, ferr := b.files("bench", int64(*flagFileMB)<<20)
	if ferr != nil {
		progress("files: %v", ferr)
	}
	eight, eightRSS, eightErr := b.eight()
	if eightErr != nil {
		progress("eight sandboxes: %v", eightErr)
	}

	fmt.Printf("guest image %s, 2 vCPUs, 2048 MiB, TCG unless /dev/kvm is usable, %d host CPUs, %s\n\n", st.Image, runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"))
	fmt.Printf("| | p50 | p99 | min | max | runs |\n|---|---|---|---|---|---|\n")
	row := func(what string, d []time.Duration) {
		if len(d) == 0 {
			return
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %d |\n", what, msf(stats.Percentile(d, 50)), msf(stats.Percentile(d, 99)), msf(slices.Min(d)), msf(slices.Max(d)), len(d))
	}
	row("`capsem run -- true`", run)
	row("`capsem exec NAME -- true` (CLI)", cli)
	row("`sb.exec([\"true\"])` (Python client)", py)
	row("`capsem start NAME` of a stopped sandbox, until it answers", starts)
	fmt.Printf("\nexec p50 / run p50: CLI %.2f %%", 100*float64(stats.Percentile(cli, 50))/float64(runMed))
	if len(py) > 0 {
		fmt.Printf(", Python %.2f %%", 100*float64(stats.Percentile(py, 50))/float64(runMed))
	}
	fmt.Printf(" (target ≤ 2 %%); start / run: %.2f× (target ≤ 1.1×)\n", float64(startMed)/float64(runMed))
	fmt.Printf("idle supervisor RSS %.1f MiB (target ≤ 60), its QEMU %.1f MiB\n", float64(supRSS)/1024, float64(qemuRSS)/1024)
	if eightErr == nil {
		fmt.Printf("eight idle sandboxes of 512 MiB at once: %d of 8 answered an exec; their supervisors' RSS %.1f MiB in all\n", eight, float64(eightRSS)/1024)
	}
	if ferr == nil {
		mbs := func(d time.Duration) float64 { return float64(*flagFileMB) / d.Seconds() }
		fmt.Printf("\n| %d MiB file | API | 9p workspace + cp in the guest | API / 9p |\n|---|---|---|---|\n", *flagFileMB)
		fmt.Printf("| into the guest | %.0f MiB/s (%v) | %.0f MiB/s (%v) | %.2f× |\n", mbs(put), put.Round(time.Millisecond), mbs(nineIn), nineIn.Round(time.Millisecond), nineIn.Seconds()/put.Seconds())
		fmt.Printf("| out of the guest | %.0f MiB/s (%v) | %.0f MiB/s (%v) | %.2f× |\n", mbs(get), get.Round(time.Millisecond), mbs(nineOut), nineOut.Round(time.Millisecond), nineOut.Seconds()/get.Seconds())
		fmt.Printf("(target: API ≥ 2× 9p each way)\n")
	}
}

// timed runs capsem with args and returns how long it took.
func (b *bench) timed(args ...string) (time.Duration, error) {
	cmd := exec.Command(b.capsem, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("capsem %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return d, nil
}

func (b *bench) status(name string) api.Status {
	out, err := exec.Command(b.capsem, "ls", "--json", "--data", b.data).Output()
	if err != nil {
		fatal(err)
	}
	var list []api.Status
	if err := json.Unmarshal(out, &list); err != nil {
		fatal(err)
	}
	for _, s := range list {
		if s.Name == name {
			return s
		}
	}
	fatal(fmt.Errorf("no sandbox %s in capsem ls", name))
	return api.Status{}
}

func (b *bench) rmAll() {
	entries, _ := os.ReadDir(filepath.Join(b.data, "sandboxes"))
	for _, e := range entries {
		_ = exec.Command(b.capsem, "rm", "--force", "--data", b.data, e.Name()).Run()
	}
}

// pythonScript times n execs of true through the Python client, one
// process, after five unmeasured ones; it prints one duration in seconds
// a line.
const pythonScript = `import sys, time
sys.path.insert(0, sys.argv[1])
import capsem
sb = capsem.Sandbox(sys.argv[2], data=sys.argv[3])
for _ in range(5):
    sb.exec(["true"])
for _ in range(int(sys.argv[4])):
    t0 = time.perf_counter()
    r = sb.exec(["true"])
    d = time.perf_counter() - t0
    assert r.exit_code == 0, r
    print(d, flush=True)
`

func (b *bench) pythonExecs(n int) ([]time.Duration, error) {
	if *flagPython == "" {
		return nil, fmt.Errorf("skipped (-python \"\")")
	}
	sdk, err := filepath.Abs("sdk/python")
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(sdk, "capsem")); err != nil {
		return nil, fmt.Errorf("no Python client at %s (run from the repository's root)", sdk)
	}
	cmd := exec.Command(*flagPython, "-c", pythonScript, sdk, "bench", b.data, fmt.Sprint(n))
	cmd.Env = append(os.Environ(), "CAPSEM_BIN="+b.capsem)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v\n%s", err, stderr.String())
	}
	var ds []time.Duration
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var s float64
		if _, err := fmt.Sscan(sc.Text(), &s); err == nil {
			ds = append(ds, time.Duration(s*float64(time.Second)))
		}
	}
	return ds, nil
}

// files puts a random file of size bytes into the guest and gets it back
// through the API, then copies the same file through the 9p workspace with
// cp in the guest, both ways.
func (b *bench) files(name string, size int64) (put, get, nineIn, nineOut time.Duration, err error) {
	src := filepath.Join(b.ws, "big.bin")
	f, err := os.Create(src)
	if err != nil {
		return
	}
	if _, err = io.CopyN(f, rand.Reader, size); err != nil {
		f.Close()
		return
	}
	f.Close()
	defer os.Remove(src)
	client := api.NewClient(b.status(name).Socket)
	defer client.Close()
	ctx := context.Background()

	in, err := os.Open(src)
	if err != nil {
		return
	}
	t0 := time.Now()
	err = client.PutFile(ctx, "/root/big-api.bin", in, "")
	put = time.Since(t0)
	in.Close()
	if err != nil {
		return
	}
	out, err := os.Create(filepath.Join(b.ws, "..", "got.bin"))
	if err != nil {
		return
	}
	t0 = time.Now()
	n, err := client.GetFile(ctx, "/root/big-api.bin", out)
	get = time.Since(t0)
	out.Close()
	os.Remove(out.Name())
	if err != nil || n != size {
		err = fmt.Errorf("get: %d of %d bytes: %v", n, size, err)
		return
	}
	if nineIn, err = b.timed("exec", "--data", b.data, name, "--", "cp", "/workspace/big.bin", "/root/big-9p.bin"); err != nil {
		return
	}
	if nineOut, err = b.timed("exec", "--data", b.data, name, "--", "cp", "/root/big-api.bin", "/workspace/out.bin"); err != nil {
		return
	}
	os.Remove(filepath.Join(b.ws, "out.bin"))
	_, err = b.timed("exec", "--data", b.data, name, "--", "rm", "-f", "/root/big-api.bin", "/root/big-9p.bin")
	return
}

// eight starts eight 512 MiB sandboxes at once, has each answer an exec,
// and sums their supervisors' RSS.
func (b *bench) eight() (answered int, rssKiBSum int64, err error) {
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("eight-%d", i)
			if _, errs[i] = b.timed("start", "--data", b.data, "--ca-dir", b.ca, "--workspace", b.ws, "--memory", "512", "--disk", "1", name); errs[i] != nil {
				return
			}
			_, errs[i] = b.timed("exec", "--data", b.data, name, "--", "true")
		}()
	}
	wg.Wait()
	for i, e := range errs {
		if e == nil {
			answered++
			rssKiBSum += rssKiB(b.status(fmt.Sprintf("eight-%d", i)).PID)
		} else {
			err = e
		}
	}
	for i := range 8 {
		_ = exec.Command(b.capsem, "rm", "--force", "--data", b.data, fmt.Sprintf("eight-%d", i)).Run()
	}
	if answered == 8 {
		err = nil
	}
	return
}

// rssKiB is a process's resident set in KiB.
func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var n int64
			fmt.Sscan(rest, &n)
			return n
		}
	}
	return 0
}

// qemuRSSKiB is the RSS of the QEMU whose command line holds mark.
func qemuRSSKiB(mark string) int64 {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		c, err := os.ReadFile(p)
		if err == nil && bytes.Contains(c, []byte("qemu-system")) && bytes.Contains(c, []byte(mark)) {
			var pid int
			fmt.Sscan(filepath.Base(filepath.Dir(p)), &pid)
			return rssKiB(pid)
		}
	}
	return 0
}

func msf(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "sandboxbench: "+format+"\n", args...)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "sandboxbench:", err)
	os.Exit(1)
}
