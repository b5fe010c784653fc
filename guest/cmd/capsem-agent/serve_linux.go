package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/agent"
	"github.com/capsem/capsem/guest/boot"
	"github.com/capsem/capsem/guest/bootparam"
	"github.com/capsem/capsem/guest/proto"
)

// serveMain runs the server: `capsem-agent serve`. Exit status 0 when the
// host asked for shutdown or hung up, 1 on an error, 2 on bad flags.
func serveMain(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	bootFile := fs.String("boot", bootInfoPath, "boot facts written by PID 1 (optional)")
	bootFD := fs.Int("boot-fd", -1, "read the boot facts from this descriptor instead, once PID 1 closes it (the server is started while PID 1 still boots)")
	port := fs.String("port", "", "virtio-serial port name or device path (default capsem.control)")
	vsock := fs.Uint("vsock", 0, "listen on this vsock port instead")
	stdio := fs.Bool("stdio", false, "serve on stdin/stdout instead")
	workspace := fs.String("workspace", "", "directory to watch and run commands in")
	debug := fs.Bool("debug", false, "log every session")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var bi bootInfo
	var berr error
	if *bootFD >= 0 {
		bi, berr = readBootInfoFrom(os.NewFile(uintptr(*bootFD), "boot-fd"))
	} else {
		bi, berr = readBootInfo(*bootFile)
	}
	if berr != nil && (*bootFD >= 0 || !errors.Is(berr, os.ErrNotExist)) {
		fmt.Fprintln(os.Stderr, "capsem-agent:", berr)
		return 1
	}
	if *port != "" {
		bi.Port = *port
	}
	if *vsock != 0 {
		bi.Vsock = uint32(*vsock)
	}
	if *workspace != "" {
		bi.Workspace = *workspace
	}
	bi.Debug = bi.Debug || *debug
	log := newLogger(os.Stderr, bi.Debug)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var rw io.ReadWriteCloser
	var conns <-chan io.ReadWriteCloser
	var err error
	switch {
	case *stdio:
		rw = stdioConn{}
	case bi.Vsock != 0:
		log.Debug("waiting for the host on vsock", "port", bi.Vsock)
		rw, conns, err = listenVsock(ctx, bi.Vsock, log)
	default:
		rw, err = openControlPort(bi.Port)
	}
	if err != nil {
		log.Error("no control channel", "err", err)
		return 1
	}
	err = serve(ctx, rw, conns, bi, log)
	switch {
	case err == nil, errors.Is(err, agent.ErrShutdown), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		log.Debug("server done", "reason", err)
		return 0
	case ctx.Err() != nil:
		return 0
	}
	log.Error("server failed", "err", err)
	return 1
}

// listenVsock accepts the host's first connection on vsock port, and
// goes on accepting until ctx is done: the host of a guest restored from
// a snapshot connects again (agent.Config.Conns).
func listenVsock(ctx context.Context, port uint32, log *slog.Logger) (io.ReadWriteCloser, <-chan io.ReadWriteCloser, error) {
	ln, err := boot.NewVsockListener(port)
	if err != nil {
		return nil, nil, err
	}
	first, err := ln.Accept(0)
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	conns := make(chan io.ReadWriteCloser)
	context.AfterFunc(ctx, func() { ln.Close() })
	go func() {
		defer ln.Close()
		for {
			f, err := ln.Accept(0)
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("vsock: no more host connections", "err", err)
				}
				return
			}
			select {
			case conns <- f:
			case <-ctx.Done():
				f.Close()
				return
			}
		}
	}()
	return first, conns, nil
}

func openControlPort(port string) (*os.File, error) {
	if port == "" {
		port = bootparam.ControlPort
	}
	if !strings.HasPrefix(port, "/") {
		dev, err := boot.WaitPort("/sys", "/dev", port, 10*time.Second)
		if err != nil {
			return nil, err
		}
		port = dev
	}
	return boot.OpenPort(port)
}

// serve runs the agent over rw with what PID 1 found at boot.
func serve(ctx context.Context, rw io.ReadWriteCloser, conns <-chan io.ReadWriteCloser, bi bootInfo, log *slog.Logger) error {
	root := bi.Root
	if root == "" {
		root = "/"
	}
	shell := agent.DefaultShell()
	env := append(agent.DefaultEnv(shell), bi.CAEnv...)
	dir := bi.Workspace
	if dir == "" {
		dir = "/root"
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			dir = "/"
		}
	}
	cfg := agent.Config{
		Version:  version,
		Env:      env,
		Dir:      dir,
		Shell:    shell,
		WatchDir: bi.Workspace,
		Logger:   log,
		Setup: func(ctx context.Context, host proto.Hello) (proto.Ready, error) {
			return setup(host, bi, root, log)
		},
		Workspace: workspace(bi),
		Conns:     conns,
	}
	if bi.Managed {
		// The guest's own clock and generator, which a restored snapshot
		// has stale; a server PID 1 did not start is not in a guest.
		cfg.SetClock = func(t time.Time) error {
			_, err := boot.SetClock(t)
			return err
		}
		cfg.Reseed = agent.AddEntropy
	}
	return agent.Serve(ctx, rw, cfg)
}

// workspace is the workspace's mount for Freeze and Thaw, as PID 1 did it
// (or deferred it); nil when it mounted none.
func workspace(bi bootInfo) *agent.Workspace {
	if bi.WSMount == nil {
		return nil
	}
	m := boot.Mount{Source: bi.WSMount.Source, Target: bi.WSMount.Target, FSType: bi.WSMount.FSType,
		Flags: bi.WSMount.Flags, Data: bi.WSMount.Data, Mode: 0o755}
	return &agent.Workspace{
		Path:     m.Target,
		Deferred: bi.WSDefer,
		Mount: func() (string, error) {
			if err := boot.Do(m); err != nil {
				return "", err
			}
			return m.FSType, nil
		},
		Unmount: func() error {
			err := unix.Unmount(m.Target, 0)
			if errors.Is(err, unix.EINVAL) {
				return nil // not mounted (any more): nothing holds QEMU back
			}
			if err != nil {
				return fmt.Errorf("unmount %s: %w", m.Target, err)
			}
			return nil
		},
	}
}

// setup does what the host's Hello asks for — set the clock (in a guest
// PID 1 booted), install its CA — and returns the boot facts.
func setup(host proto.Hello, bi bootInfo, root string, log *slog.Logger) (proto.Ready, error) {
	ready := bi.Ready
	ready.Warnings = append([]string(nil), ready.Warnings...)
	if bi.Managed && host.Time != 0 {
		if set, err := boot.SetClock(time.Unix(0, host.Time)); err != nil {
			ready.Warnings = append(ready.Warnings, err.Error())
		} else if set {
			log.Debug("clock set from the host")
		}
	}
	if host.CA != "" {
		files, err := boot.InstallCA(root, []byte(host.CA))
		if err != nil {
			return ready, err
		}
		ready.CAFiles = append(ready.CAFiles, files...)
		ready.Env = append(ready.Env, boot.CAEnv()...)
	}
	ready.Uptime = int64(boot.Uptime())
	return ready, nil
}

// stdioConn is the server's end over stdin and stdout.
type stdioConn struct{}

func (stdioConn) Read(p []byte) (int, error)  { return os.Stdin.Read(p) }
func (stdioConn) Write(p []byte) (int, error) { return os.Stdout.Write(p) }
func (stdioConn) Close() error {
	os.Stdin.Close()
	return os.Stdout.Close()
}

func newLogger(w io.Writer, debug bool) *slog.Logger {
	level := slog.LevelWarn
	if debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})).With("prog", "capsem-agent")
}
