//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/capsem/capsem/sandbox/api"
)

var (
	flagCapsem   = flag.String("capsem", "bin/capsem", "the capsem binary (capsem-agent next to it)")
	flagRounds   = flag.Int("rounds", 5, "measured rounds of each series, after one unmeasured")
	flagTouchMiB = flag.Int("touch-mib", 500, "MiB of random bytes the guest writes to /dev/shm before the touched snapshot")
)

// The sandbox the resumes, the fork's snapshot and the touched snapshot
// are made of, and its snapshots' tags.
const (
	srcName    = "src"
	readyTag   = "ready"
	touchedTag = "touched"
)

// results is everything report prints; a section that failed has its
// error and what it measured before.
type results struct {
	image   string
	idle    api.Snapshot // src@ready: the fork's snapshot
	idleErr error

	resume    resumeResult
	resumeErr error
	fork      forkResult
	forkErr   error
	touched   touchedResult
	touchErr  error

	boot    bootResult
	bootErr error
}

func main() {
	flag.Parse()
	os.Exit(run())
}

func run() int {
	if *flagRounds < 1 {
		progress("-rounds %d: want at least 1", *flagRounds)
		return 2
	}
	capsem, err := filepath.Abs(*flagCapsem)
	if err != nil {
		progress("%v", err)
		return 1
	}
	if _, err := os.Stat(capsem); err != nil {
		progress("%v (go tool task build makes it)", err)
		return 1
	}
	work, err := os.MkdirTemp("", "snapbench")
	if err != nil {
		progress("%v", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b := &bench{ctx: ctx, capsem: capsem, work: work,
		data: filepath.Join(work, "data"), ca: filepath.Join(work, "ca"), ws: filepath.Join(work, "ws")}
	defer func() {
		left := b.rmAll()
		if pids := b.leftovers(); len(pids) > 0 {
			progress("processes still running under %s after capsem rm --force: %v (left in place)", work, pids)
		} else if len(left) == 0 {
			os.RemoveAll(work)
		}
		if len(left) > 0 {
			progress("could not remove %v: %s kept", left, work)
		}
	}()
	if err := os.MkdirAll(b.ws, 0o755); err != nil {
		progress("%v", err)
		return 1
	}

	var r results
	if err := b.setUp(&r); err != nil {
		progress("%v", err)
		return 1
	}

	// 1. Resume, on src.
	r.resume, r.resumeErr = b.resume(srcName, *flagRounds)
	if r.resumeErr != nil {
		progress("resume: %v", r.resumeErr)
		if err := b.ensureRunning(srcName); err != nil {
			progress("%v", err)
			return 1
		}
	}
	// The fork's snapshot of the idle guest, then 3. the touched one
	// (taken of the same guest after), then src stops: the forks run on
	// a machine with nothing else of the bench's.
	r.idle, _, r.idleErr = b.snapshot(srcName, readyTag)
	if r.idleErr != nil {
		progress("snapshot %s@%s: %v", srcName, readyTag, r.idleErr)
	} else {
		progress("snapshot of the idle guest: paused %.0f ms, %.1f MiB on disk", r.idle.PausedMS, mibf(r.idle.Bytes))
	}
	r.touched, r.touchErr = b.touched(srcName, touchedTag, *flagTouchMiB)
	if r.touchErr != nil {
		progress("touched: %v", r.touchErr)
	}
	if err := b.stop(srcName); err != nil {
		progress("%v", err)
	}
	// 2. Forks of src@ready.
	if r.idleErr == nil {
		r.fork, r.forkErr = b.forks(srcName+"@"+readyTag, *flagRounds)
	} else {
		r.forkErr = fmt.Errorf("no snapshot to fork: %w", r.idleErr)
	}
	if r.forkErr != nil {
		progress("fork: %v", r.forkErr)
	}
	if err := b.rm(srcName); err != nil {
		progress("%v", err)
	}
	// 4. The boot snapshot, alone on the machine.
	r.boot, r.bootErr = b.bootSnapshot(*flagRounds)
	if r.bootErr != nil {
		progress("boot snapshot: %v", r.bootErr)
	}
	if ctx.Err() != nil {
		progress("interrupted")
		return 1
	}

	report(&r)
	for _, e := range []error{r.resumeErr, r.idleErr, r.forkErr, r.fork.eightErr, r.touchErr, r.bootErr} {
		if e != nil {
			return 1
		}
	}
	return 0
}

// setUp makes src, has it answer a few execs (the exec path warmed) and
// writes its marker.
func (b *bench) setUp(r *results) error {
	if _, err := b.start(srcName); err != nil {
		return err
	}
	for range 3 {
		if _, err := b.execTrue(srcName); err != nil {
			return err
		}
	}
	if err := b.writeMarker(srcName); err != nil {
		return err
	}
	st, err := b.status(srcName)
	if err != nil {
		return err
	}
	r.image = st.Image
	return nil
}

// ensureRunning starts name if a failed section left it otherwise, and
// writes its marker again (a start that booted has none).
func (b *bench) ensureRunning(name string) error {
	if b.wantState(name, "running") != nil {
		if _, err := b.start(name); err != nil {
			return err
		}
	}
	return b.writeMarker(name)
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "snapbench: "+format+"\n", args...)
}
