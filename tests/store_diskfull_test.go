package tests

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// smallDisk mounts a tmpfs of size MiB for the test, or skips (not root,
// no mount).
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fillDisk writes zeros with dd into dir/name until dir has about leave
// bytes free.
func fillDisk(t *testing.T, dir, name string, leave uint64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := st.Bavail * uint64(st.Bsize)
	if free <= leave {
		t.Fatalf("%d bytes free, cannot leave %d", free, leave)
	}
	out, err := exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(dir, name), "bs=64k",
		fmt.Sprintf("count=%d", (free-leave)/(64<<10))).CombinedOutput()
	if err != nil {
		t.Fatalf("dd: %v: %s", err, out)
	}
	syscall.Statfs(dir, &st)
	t.Logf("%s written: %.1f MiB free", name, float64(st.Bavail*uint64(st.Bsize))/(1<<20))
}

// TestStoreDiskFull runs capsem-net with its store on a small disk and
// fills the disk under it with dd, while a guest in the namespace keeps
// working: below the reserve (--min-free-disk) a new flow to an allowed
// name is refused (RST) and an allowed name gets SERVFAIL — nothing happens
// that could not be recorded — and the refusals are recorded; below the
// floor, events are counted instead of written; once the filler is gone,
// flows connect again, and the store holds every event it acknowledged,
// the gap as one unstored event, and why. capsem-net stays up throughout
// and says, when it stops, that events were not stored.
func TestStoreDiskFull(t *testing.T) {
	disk := smallDisk(t, 128)
	data := filepath.Join(disk, "data")
	e, _ := startBasic(t, envOptions{extraArgs: []string{"--data", data, "--min-free-disk", "32MiB"}}, "") // floor 8 MiB
	e.dataDir = data
	// The guest dials echo.test's synthetic address from here on: a name
	// it resolved while it could, as a client with a DNS cache would.
	echo := e.digA("echo.test", "@198.18.0.1").String()
	if got := e.connect(echo, 8080); got != "connected" {
		t.Fatalf("before the disk fills: %s", got)
	}

	fillDisk(t, disk, "filler-1", 20<<20) // below the reserve, above the floor
	time.Sleep(300 * time.Millisecond)    // the free space is read at most every 100 ms
	if got := e.connect(echo, 8080); got != "refused" {
		t.Errorf("a new flow with %s below the reserve: %s, want refused", data, got)
	}
	if st, n := e.digStatus("allowed.test", "@198.18.0.1"); st != "SERVFAIL" || n != 0 {
		t.Errorf("an allowed name with the disk below the reserve: %s with %d answers, want SERVFAIL", st, n)
	}

	fillDisk(t, disk, "filler-2", 2<<20) // below the floor: nothing is written
	time.Sleep(300 * time.Millisecond)
	for range 5 {
		e.digStatus("denied.test", "@198.18.0.1")
	}
	if got := e.connect(echo, 8080); got != "refused" {
		t.Errorf("a new flow with the disk full: %s, want refused", got)
	}

	for _, f := range []string{"filler-1", "filler-2"} {
		if err := os.Remove(filepath.Join(disk, f)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for e.connect(echo, 8080) != "connected" {
		if time.Now().After(deadline) {
			t.Fatalf("flows still refused 15 s after space returned\n%s", e.out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Stop: capsem-net flushes everything and says the record has a gap.
	e.signal(syscall.SIGTERM)
	err := e.cmd.Wait()
	e.stopped = true
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(e.out.String(), "counted but not stored") {
		t.Errorf("capsem-net on SIGTERM: %v, want exit 1 saying events were counted but not stored\n%s", err, e.out.String())
	}
	if !strings.Contains(e.out.String(), "kept in reserve (--min-free-disk)") {
		t.Errorf("capsem-net's log does not say the disk ran low:\n%s", e.out.String())
	}

	evs := readEvents(t, data)
	var states []string
	var unstored int64
	refusedFlows, refusedDNS, connected := 0, 0, 0
	for _, ev := range evs {
		switch {
		case ev.Recording != nil:
			states = append(states, ev.Recording.State)
			unstored += ev.Recording.Count
		case ev.Net != nil && ev.Net.Reason == "store-unavailable":
			refusedFlows++
		case ev.DNS != nil && ev.DNS.Reason == "store-unavailable" && ev.DNS.Answer == "SERVFAIL":
			refusedDNS++
		case ev.Net != nil && ev.Net.Decision == store.Allowed && ev.Net.Domain == "echo.test":
			connected++
		}
	}
	if got := strings.Join(states, " "); !strings.HasPrefix(got, "disk-low unstored") || !strings.HasSuffix(got, "resumed") {
		t.Errorf("recording events %q, want disk-low, unstored, …, resumed\n%s", got, dumpEvents(evs))
	}
	if unstored < 5 {
		t.Errorf("%d events counted as unstored, want at least the 5 denied queries asked while the disk was full", unstored)
	}
	if refusedFlows < 1 || refusedDNS < 1 {
		t.Errorf("%d refused flows and %d refused DNS answers recorded, want at least 1 and 1\n%s", refusedFlows, refusedDNS, dumpEvents(evs))
	}
	if connected < 2 {
		t.Errorf("%d allowed flows to echo.test recorded, want the one before and the one after", connected)
	}
	st, err := store.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sessions, _ := st.Sessions()
	if len(sessions) != 1 || sessions[0].Counts.Lost != unstored {
		t.Errorf("session record %+v, want Lost = %d", sessions, unstored)
	}
}
