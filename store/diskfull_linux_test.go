package store

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// smallDisk mounts a 32 MiB tmpfs for the test, or skips when it cannot
// (not root, no mount).
func smallDisk(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount a 32 MiB tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

func freeOn(t *testing.T, dir string) uint64 {
	t.Helper()
	n, err := freeSpace(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// fill writes a file of zeros with dd until dir has about leave bytes free
// (or none, when leave is 0: dd stops at ENOSPC).
func fill(t *testing.T, dir, name string, leave uint64) {
	t.Helper()
	free := freeOn(t, dir)
	args := []string{"if=/dev/zero", "of=" + filepath.Join(dir, name), "bs=64k"}
	if leave > 0 {
		if free <= leave {
			t.Fatalf("%d bytes free, cannot leave %d", free, leave)
		}
		args = append(args, fmt.Sprintf("count=%d", (free-leave)/(64<<10)))
	}
	out, err := exec.Command("dd", args...).CombinedOutput()
	if err != nil && (leave > 0 || !strings.Contains(string(out), "No space left")) {
		t.Fatalf("dd: %v: %s", err, out)
	}
	t.Logf("filled %s: %d bytes free", name, freeOn(t, dir))
}

func countKinds(t *testing.T, s *Store, id string) (dns, lost int64, states []string) {
	t.Helper()
	evs := collect(t, s, id)
	checkSeqs(t, evs, id)
	for _, e := range evs {
		switch {
		case e.DNS != nil:
			dns++
		case e.Recording != nil:
			states = append(states, e.Recording.State)
			lost += e.Recording.Count
		}
	}
	return
}

// TestDiskFullOnARealDisk fills a real (tmpfs) filesystem under the store
// with dd: below the reserve Admit fails while events are still written;
// below the floor they are counted; once the filler is removed Admit
// succeeds again and writing resumes; the store reopens with every synced
// event. Then the same with the watch off and the disk filled to the last
// byte, so that pebble itself meets ENOSPC: the process goes on, and
// recovers when space returns.
func TestDiskFullOnARealDisk(t *testing.T) {
	captureLog(t)
	t.Run("watched", func(t *testing.T) {
		disk := smallDisk(t)
		dir := filepath.Join(disk, "store")
		s, err := OpenWith(dir, Options{MinFreeDisk: 8 << 20}) // floor 2 MiB
		if err != nil {
			t.Fatal(err)
		}
		w := beginT(t, s, Session{ID: "real"})
		for range 1000 {
			w.Append(Event{DNS: &DNS{QName: "before.test", Decision: Denied}})
		}
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}

		fill(t, disk, "filler-1", 4<<20) // below the reserve, above the floor
		waitFor(t, "Admit to refuse", func() bool { return errors.Is(w.Admit(), ErrNotRecording) })
		if err := w.Admit(); !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "--min-free-disk") {
			t.Errorf("Admit: %v", err)
		}
		for range 100 {
			w.Append(Event{DNS: &DNS{QName: "low.test", Decision: Denied}})
		}
		if err := w.Sync(); err != nil {
			t.Fatalf("Sync below the reserve: %v", err)
		}

		fill(t, disk, "filler-2", 1<<20) // below the floor
		s.recheckDisk()
		for range 100 {
			w.Append(Event{DNS: &DNS{QName: "full.test", Decision: Denied}})
		}

		for _, f := range []string{"filler-1", "filler-2"} {
			if err := os.Remove(filepath.Join(disk, f)); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "Admit to admit again", func() bool { return w.Admit() == nil })
		for range 10 {
			w.Append(Event{DNS: &DNS{QName: "after.test", Decision: Denied}})
		}
		if err := w.End(nil); err == nil || !strings.Contains(err.Error(), "100 events were counted but not stored") {
			t.Errorf("End: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		s, err = OpenWith(dir, Options{MinFreeDisk: 8 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		dns, lost, states := countKinds(t, s, "real")
		if dns != 1000+100+10 || lost != 100 {
			t.Errorf("reopened: %d dns events and %d unstored, want 1110 and 100", dns, lost)
		}
		if got := strings.Join(states, " "); got != "disk-low unstored resumed" {
			t.Errorf("recording events %q", got)
		}
		if sess, _ := s.Session("real"); sess.Counts.Lost != 100 || sess.EndedAt.IsZero() {
			t.Errorf("session record %+v", sess)
		}
	})

	t.Run("ENOSPC", func(t *testing.T) {
		disk := smallDisk(t)
		dir := filepath.Join(disk, "store")
		s, err := OpenWith(dir, Options{MinFreeDisk: -1}) // not watched: pebble meets the full disk
		if err != nil {
			t.Fatal(err)
		}
		w := beginT(t, s, Session{ID: "enospc"})
		for range 1000 {
			w.Append(Event{DNS: &DNS{QName: "before.test"}})
		}
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		fill(t, disk, "filler", 0)
		// Enough to need more write-ahead log than the disk has.
		big := strings.Repeat("x", 4000)
		for range 2000 {
			w.Append(Event{DNS: &DNS{QName: "full.test", Reason: big}})
		}
		waitFor(t, "Admit to refuse", func() bool { return errors.Is(w.Admit(), ErrNotRecording) })
		if err := os.Remove(filepath.Join(disk, "filler")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "Admit to admit again", func() bool { return w.Admit() == nil })
		w.Append(Event{DNS: &DNS{QName: "after.test"}})
		w.End(nil) // reports what was held, if anything
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s, err = OpenWith(dir, Options{MinFreeDisk: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		dns, lost, _ := countKinds(t, s, "enospc")
		if dns+lost != 1000+2000+1 {
			t.Errorf("reopened: %d stored + %d unstored, want all 3001 appended", dns, lost)
		}
		t.Logf("%d stored, %d counted while the disk was full", dns, lost)
	})
}
