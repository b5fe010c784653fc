package store

import (
	"bufio"
	"crypto/ed25519"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	crashChildEnv = "CAPSEM_STORE_CRASH_CHILD" // "dir session-id" in the child
)

// TestSIGKILL re-executes the test binary as a child that appends and syncs
// events, reporting on stdout how many are durable, and SIGKILLs it in the
// middle of the stream. The reopened store must hold at least the reported
// events, numbered 1..N without gaps, each intact, with counts matching.
// Three rounds run against the same directory, so a store that has been
// killed several times keeps every earlier session too.
func TestSIGKILL(t *testing.T) {
	if arg := os.Getenv(crashChildEnv); arg != "" {
		crashChild(arg) // never returns
	}
	if testing.Short() {
		t.Skip("skipping the SIGKILL test in -short mode")
	}
	dir := t.TempDir()
	type round struct {
		id      string
		durable int // net events the child reported synced
	}
	var rounds []round
	for r := range 3 {
		id := fmt.Sprintf("crash-%d", r)
		cmd := exec.Command(os.Args[0], "-test.run=^TestSIGKILL$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir+" "+id)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()

		// Kill somewhere between 100 ms and 500 ms after the first sync.
		var killAt <-chan time.Time
		timeout := time.After(60 * time.Second)
		durable, checkedLock := 0, false
	read:
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					cmd.Wait()
					t.Fatalf("round %d: child exited before it was killed (last durable %d)", r, durable)
				}
				n, err := strconv.Atoi(strings.TrimPrefix(line, "synced "))
				if err != nil {
					cmd.Process.Kill()
					t.Fatalf("round %d: child said %q", r, line)
				}
				durable = n
				if !checkedLock {
					// While the child runs, the store is in use, by its pid.
					checkedLock = true
					_, err := Open(dir)
					var iu *InUseError
					if !errors.As(err, &iu) || iu.PID != cmd.Process.Pid {
						cmd.Process.Kill()
						t.Fatalf("Open while the child (pid %d) holds the store: %v", cmd.Process.Pid, err)
					}
					killAt = time.After(time.Duration(100+rand.IntN(400)) * time.Millisecond)
				}
			case <-killAt:
				break read
			case <-timeout:
				cmd.Process.Kill()
				t.Fatalf("round %d: child made no progress", r)
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for line := range lines { // a line written before the kill counts
			if n, err := strconv.Atoi(strings.TrimPrefix(line, "synced ")); err == nil {
				durable = n
			}
		}
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child ended with %v, not by SIGKILL", r, err)
		}
		t.Logf("round %d: killed after %d net events reported durable", r, durable)
		rounds = append(rounds, round{id, durable})

		// Read it first without writing (the WAL is replayed in memory),
		// then as the next writer will open it.
		for _, open := range []func(string) (*Store, error){OpenReadOnly, Open} {
			s, err := open(dir)
			if err != nil {
				t.Fatalf("round %d: reopen after SIGKILL: %v", r, err)
			}
			for _, rd := range rounds {
				checkCrashed(t, s, rd.id, rd.durable)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func checkCrashed(t *testing.T, s *Store, id string, durable int) {
	t.Helper()
	sess, err := s.Session(id)
	if err != nil {
		t.Fatalf("session %s after SIGKILL: %v", id, err)
	}
	if !sess.EndedAt.IsZero() {
		t.Errorf("session %s: EndedAt %v, but it was killed", id, sess.EndedAt)
	}
	// The record, its counts and its chain's seal, is written with a batch
	// at most every recordEvery: they cover the events up to its head.
	if sess.Chain == nil {
		t.Fatalf("session %s after SIGKILL: no chain in the record", id)
	}
	var total, nets, dnss int
	var headNets, headDNS int
	err = s.Events(id, func(ev Event) error {
		total++
		if ev.Seq != uint64(total) {
			return fmt.Errorf("seq %d where %d was expected", ev.Seq, total)
		}
		if ev.Seq == sess.Chain.Seq+1 {
			headNets, headDNS = nets, dnss
		}
		switch {
		case ev.Kind == KindNet && ev.Net != nil:
			if want := fmt.Sprintf("n%d", nets); ev.Net.Detail != want || ev.Net.Port != uint16(nets) || ev.Net.Count != int64(nets) {
				return fmt.Errorf("seq %d: net event %+v, want detail %s", ev.Seq, ev.Net, want)
			}
			nets++
		case ev.Kind == KindDNS && ev.DNS != nil:
			if want := fmt.Sprintf("q%d.example", dnss); ev.DNS.QName != want || ev.DNS.Decision != Denied {
				return fmt.Errorf("seq %d: dns event %+v, want qname %s", ev.Seq, ev.DNS, want)
			}
			dnss++
		default:
			return fmt.Errorf("seq %d: unexpected event %+v", ev.Seq, ev)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("session %s after SIGKILL: %v", id, err)
	}
	if nets < durable {
		t.Fatalf("session %s: %d net events after SIGKILL, but %d were reported durable", id, nets, durable)
	}
	if sess.Chain.Seq == uint64(total) {
		headNets, headDNS = nets, dnss
	}
	// The chain holds over every stored event, sealed up to the head.
	st, err := s.VerifyChain(id)
	if err != nil || !st.Chained || st.Events != uint64(total) || st.Unsealed != uint64(total)-sess.Chain.Seq ||
		!st.Key.Equal(crashSealKey.Public()) {
		t.Fatalf("session %s after SIGKILL: chain %+v, %v; want %d events, sealed up to %d by the child's key", id, st, err, total, sess.Chain.Seq)
	}
	t.Logf("session %s: %d events, %d after the record's head", id, total, st.Unsealed)
	// The counts are committed in the same batch as the head.
	if sess.Counts.Events != int64(sess.Chain.Seq) || sess.Counts.Kinds[KindNet] != int64(headNets) ||
		sess.Counts.Kinds[KindDNS] != int64(headDNS) || sess.Counts.Denied != int64(headDNS) {
		t.Fatalf("session %s: counts %+v, but up to the head (%d) %d net and %d dns events are stored", id, sess.Counts, sess.Chain.Seq, headNets, headDNS)
	}
}

// crashChild appends until it is killed: net events in bursts followed by a
// Sync and a "synced N" line, and DNS events from a second goroutine that
// never syncs.
// crashSealKey is the crashing writer's seal key (fixed: parent and child
// must agree on it).
var crashSealKey = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))

func crashChild(arg string) {
	dir, id, _ := strings.Cut(arg, " ")
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(3)
	}
	s, err := OpenWith(dir, Options{SealKey: crashSealKey})
	if err != nil {
		fail(err)
	}
	w, err := s.Begin(Session{ID: id, Command: []string{"crash-child"}})
	if err != nil {
		fail(err)
	}
	go func() {
		for i := 0; ; i++ {
			w.Append(Event{DNS: &DNS{QName: fmt.Sprintf("q%d.example", i), Decision: Denied}})
			if i%64 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	n := 0
	for {
		burst := 1 + rand.IntN(2000)
		for range burst {
			w.Append(Event{Net: &Net{Detail: fmt.Sprintf("n%d", n), Port: uint16(n), Count: int64(n)}})
			n++
		}
		if err := w.Sync(); err != nil {
			fail(err)
		}
		fmt.Printf("synced %d\n", n)
	}
}
