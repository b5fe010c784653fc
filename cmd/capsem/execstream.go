package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capsem/capsem/guest/proto"
)

// execSession is a command running in a guest, as execute drives it: a
// local guest's proto.Session (capsem run) or an exec through a
// supervisor's API (capsem exec).
type execSession interface {
	Stdout() io.Reader
	Stderr() io.Reader
	Write(p []byte) (int, error) // to the command's stdin
	CloseStdin() error
	Signal(sig string) error
	Resize(rows, cols uint16) error
	Done() <-chan struct{}
	Wait() (proto.Exit, error)
}

// execOptions is a command and how to run it.
type execOptions struct {
	argv    []string
	env     []string
	dir     string // the working directory ("": the workspace)
	tty     bool
	timeout time.Duration // 0: none
	// confirm, when set, asks the guest to confirm that the signals sent
	// so far reached it (capsem run: a ping its agent answers after them);
	// an error ends execute, for the caller to stop a guest that does not
	// listen. Either way a command that does not end within killGrace of
	// KILL is given up.
	confirm func(ctx context.Context) error
}

// killGrace is how long a command has to end after KILL: a KILL is
// delivered in milliseconds, so a command still there after 5 s runs in a
// guest that does not listen, or one that answers pings but does not say
// the command ended.
const killGrace = 5 * time.Second

// execute runs o.argv in the guest (start starts it) and streams it: the command's stdout
// and stderr to ours, our stdin to it. Signals capsem gets go to the
// command; in tty mode the terminal is raw, so Ctrl-C reaches the guest as
// a keystroke and window changes follow.
func execute(start func(proto.Exec) (execSession, error), o execOptions, sigs <-chan os.Signal, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	ex := proto.Exec{Argv: o.argv, Env: o.env, Dir: o.dir, TTY: o.tty}
	inFile, _ := stdin.(*os.File)
	outFile, _ := stdout.(*os.File)
	// TERM and LANG, when the host passed none, get their defaults where
	// every command goes through: sandbox.Sandbox.Exec.
	if o.tty && outFile != nil {
		ex.Rows, ex.Cols = terminalSize(outFile)
	}
	sess, err := start(ex)
	if err != nil {
		var perr proto.Error
		if errors.As(err, &perr) && perr.Code != 0 {
			fmt.Fprintf(stderr, "capsem: %s\n", display(perr.Msg))
			return perr.Code, nil
		}
		return 0, fmt.Errorf("start %q in the guest: %w", o.argv, err)
	}
	if o.tty && isTerminal(inFile) {
		restore, err := makeRaw(inFile)
		if err == nil {
			defer restore()
		}
	}

	var out sync.WaitGroup
	out.Add(2)
	go func() { defer out.Done(); _, _ = io.Copy(stdout, sess.Stdout()) }()
	go func() { defer out.Done(); _, _ = io.Copy(stderr, sess.Stderr()) }()
	if stdin != nil {
		go func() {
			_, _ = io.Copy(sess, stdin)
			_ = sess.CloseStdin()
		}()
	} else {
		_ = sess.CloseStdin()
	}

	var timeout, killed <-chan time.Time
	if o.timeout > 0 {
		t := time.NewTimer(o.timeout)
		defer t.Stop()
		timeout = t.C
	}
	// Signals and resizes go out in order from a goroutine of their own:
	// a guest that does not read its control channel blocks that one, not
	// this loop, which still sees the timeout, Ctrl-C and the end.
	ctl := make(chan func() error, 16)
	deaf := make(chan error, 1)
	defer close(ctl)
	go func() {
		for f := range ctl {
			if err := f(); err != nil && o.confirm != nil {
				deaf <- err
				for range ctl {
				}
				return
			}
		}
	}()
	control := func(f func() error) {
		select {
		case ctl <- f:
		default: // 16 not sent yet: the guest takes none; the ones before decide
		}
	}
	sendSignal := func(sig string) {
		control(func() error {
			err := sess.Signal(sig)
			if err == nil && o.confirm != nil {
				err = o.confirm(context.Background())
			}
			if err != nil {
				return fmt.Errorf("the guest did not confirm signal %s: %w", sig, err)
			}
			return nil
		})
		if sig == "KILL" && killed == nil {
			// Also when the guest confirmed the signal: a guest that
			// answers pings but never reports the end must not hold a
			// timeout or Ctrl-C for ever.
			killed = time.After(killGrace)
		}
	}
	timedOut, interrupts := false, 0
wait:
	for {
		select {
		case <-sess.Done():
			break wait
		case err := <-deaf:
			return 0, err
		case <-killed:
			return 0, fmt.Errorf("%q did not end within %s of KILL: the guest does not answer", strings.Join(o.argv, " "), killGrace)
		case <-timeout:
			timedOut = true
			sendSignal("KILL")
		case sig := <-sigs:
			switch sig {
			case syscall.SIGWINCH:
				if o.tty && outFile != nil {
					rows, cols := terminalSize(outFile)
					control(func() error { _ = sess.Resize(rows, cols); return nil })
				}
			case syscall.SIGINT:
				interrupts++
				if interrupts >= 3 {
					sendSignal("KILL") // the command ignores INT
				} else {
					sendSignal("INT")
				}
			case syscall.SIGTERM:
				sendSignal("TERM")
			case syscall.SIGHUP:
				sendSignal("HUP")
			}
		}
	}
	exit, werr := sess.Wait()
	out.Wait()
	if werr != nil {
		var perr proto.Error
		if errors.As(werr, &perr) && perr.Code != 0 {
			fmt.Fprintf(stderr, "capsem: %s\n", display(perr.Msg))
			return perr.Code, nil
		}
		return 0, fmt.Errorf("the guest ended the command abnormally: %w", werr)
	}
	if timedOut {
		fmt.Fprintf(stderr, "capsem: %q killed after --timeout %s\n", strings.Join(o.argv, " "), o.timeout)
		return exitTimeout, nil
	}
	return exit.Code, nil
}
