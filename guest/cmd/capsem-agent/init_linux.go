package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/boot"
	"github.com/capsem/capsem/guest/bootparam"
	"github.com/capsem/capsem/guest/proto"
)

// initMain is PID 1: boot the guest, run the server, reap, power off.
func initMain() {
	var log *slog.Logger = newLogger(os.Stderr, false)
	defer func() {
		if r := recover(); r != nil {
			log.Error("PID 1 panicked; powering off", "panic", r)
			boot.Poweroff()
		}
	}()
	bi, srv, log, err := bootGuest()
	if err != nil {
		log.Error("boot failed; powering off", "err", err)
		boot.Poweroff()
	}
	status := superviseServer(srv, log)
	log.Debug("server ended; powering off", "status", status)
	stopEverything(bi, log)
	boot.Poweroff()
}

// stepper runs the boot steps and collects their facts and warnings.
type stepper struct {
	log   *slog.Logger
	ready proto.Ready
	start time.Time
}

func (s *stepper) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.ready.Warnings = append(s.ready.Warnings, msg)
	s.log.Warn(msg)
}

func (s *stepper) step(name string) {
	s.log.Debug(name, "uptime", boot.Uptime().Round(time.Millisecond))
}

// bootGuest performs every boot step in order. As soon as the root is in
// place it starts the server (`capsem-agent serve`), so that the server's
// start-up overlaps the network and workspace steps; the server waits for
// the boot facts, which bootGuest hands it when every step is done. An
// error means the guest cannot be offered safely; warnings go into Ready.
func bootGuest() (bi bootInfo, srv *server, log *slog.Logger, err error) {
	bi, srv, log, err = bootSteps()
	if err != nil && srv != nil {
		srv.abort()
	}
	return bi, srv, log, err
}

func bootSteps() (bootInfo, *server, *slog.Logger, error) {
	s := &stepper{log: newLogger(os.Stderr, false), start: time.Now()}
	var bi bootInfo
	var srv *server
	var grown chan growResult

	// The kernel's filesystems, and the console for messages.
	if _, err := boot.DoAll(boot.EarlyMounts()); err != nil {
		return bi, srv, s.log, err
	}
	console := openConsole()
	s.log = newLogger(console, false)

	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return bi, srv, s.log, fmt.Errorf("read /proc/cmdline: %w", err)
	}
	cfg, err := bootparam.Parse(string(cmdline))
	if err != nil {
		return bi, srv, s.log, err
	}
	s.log = newLogger(console, cfg.Debug)
	s.step("command line read")
	for _, k := range cfg.Unknown {
		s.warn("unknown kernel parameter %s ignored", k)
	}

	// No IPv6 before any interface comes up; inotify limits for big trees.
	if _, err := boot.ApplySysctls("/proc/sys", boot.EarlySysctls()); err != nil {
		s.warn("%v", err)
	}

	mods, err := boot.LoadModuleList(cfg.Modules)
	if err != nil {
		s.warn("kernel modules: %v", err)
	}
	if cfg.RW != "" {
		// The writable disk's filesystem: without it the mount fails and
		// says so.
		rw, err := boot.LoadModuleList(filepath.Join(filepath.Dir(cfg.Modules), filepath.Base(bootparam.RWModuleOrder)))
		if err != nil {
			s.warn("writable disk's kernel modules: %v", err)
		}
		mods = append(mods, rw...)
	}
	s.ready.Modules = mods
	s.step("modules loaded")

	if cfg.Root != "" {
		if err := boot.WaitFile(cfg.Root, 10*time.Second); err != nil {
			return bi, srv, s.log, err
		}
		desc, err := boot.MountRoot(cfg.Root, cfg.RootFS, cfg.RW, boot.DefaultRootLayout, "")
		if err != nil {
			return bi, srv, s.log, err
		}
		if err := boot.SwitchRoot(boot.DefaultRootLayout.Target); err != nil {
			return bi, srv, s.log, err
		}
		s.ready.Root = desc
		s.step("root switched")
		if cfg.RW != "" {
			// capsem start --disk only lengthens the disk's file; the
			// filesystem in it grows here, by the guest's kernel, while
			// the server starts and the NIC and the workspace come up.
			grown = make(chan growResult, 1)
			go func() {
				g, err := boot.GrowDisk(cfg.RW, boot.DefaultRootLayout.RW)
				grown <- growResult{g, err}
			}()
		}
	} else {
		s.ready.Root = "initramfs"
	}
	if w, err := boot.DoAll(boot.SystemMounts()); err != nil || len(w) > 0 {
		if err != nil {
			return bi, srv, s.log, err
		}
		for _, x := range w {
			s.warn("%s", x)
		}
	}
	if _, err := boot.RemoveDangerousDevices("/dev"); err != nil {
		return bi, srv, s.log, err
	}
	if err := os.MkdirAll("/run/capsem", 0o755); err != nil {
		return bi, srv, s.log, err
	}
	// The server inherits the open-file limit (the watcher pins one
	// descriptor per workspace directory).
	if err := boot.RaiseNofileLimit(); err != nil {
		s.warn("open-file limit: %v", err)
	}
	srv, err = startServer(s.log)
	if err != nil {
		return bi, srv, s.log, err
	}
	s.step("server started")

	// The CA goes into the trust stores (reading and rewriting the bundles)
	// while the NIC and the workspace come up.
	type caResult struct {
		files []string
		err   error
	}
	var caDone chan caResult
	if len(cfg.CA) > 0 {
		caDone = make(chan caResult, 1)
		go func() {
			files, err := boot.InstallCA("/", cfg.CA)
			caDone <- caResult{files, err}
		}()
	}

	if err := boot.SetHostname(cfg.Hostname); err != nil {
		s.warn("hostname: %v", err)
	}
	if !cfg.NoNetwork {
		res, err := boot.ConfigureNetwork(cfg, 10*time.Second)
		if err != nil {
			s.warn("network: %v", err)
		} else {
			s.ready.Interface, s.ready.MTU = res.Interface, res.MTU
			s.ready.Addr = res.Addr.String()
			if res.Gateway.IsValid() {
				s.ready.Gateway = res.Gateway.String()
			}
			for _, a := range res.DNS {
				s.ready.DNS = append(s.ready.DNS, a.String())
			}
		}
		if err := boot.WriteResolver("/", cfg.Hostname, res.DNS); err != nil {
			s.warn("resolv.conf: %v", err)
		}
		s.step("network up")
	}

	if m, ok := boot.WorkspaceMount(cfg); ok {
		spec := &mountSpec{Source: m.Source, Target: m.Target, FSType: m.FSType, Flags: m.Flags, Data: m.Data}
		switch {
		case cfg.WSDefer:
			// The first Thaw mounts it (a boot snapshot is taken before
			// any 9p export is mounted); the directory exists meanwhile,
			// the default one of commands.
			if err := os.MkdirAll(m.Target, m.Mode); err != nil {
				s.warn("workspace: %v", err)
			} else {
				bi.Workspace, bi.WSMount, bi.WSDefer = m.Target, spec, true
			}
			s.step("workspace deferred")
		default:
			if err := boot.Do(m); err != nil {
				s.warn("workspace: %v", err)
			} else {
				s.ready.Workspace, s.ready.WSFS = m.Target, m.FSType
				bi.Workspace, bi.WSMount = m.Target, spec
			}
			s.step("workspace mounted")
		}
	}

	if caDone != nil {
		r := <-caDone
		if r.err != nil {
			// The host meant the guest to trust it: without it every
			// intercepted TLS connection would fail, confusingly.
			return bi, srv, s.log, fmt.Errorf("CA from the command line: %w", r.err)
		}
		s.ready.CAFiles = r.files
		bi.CAEnv = boot.CAEnv()
		s.step("CA installed")
	}

	if grown != nil {
		s.collectGrowth(grown)
		s.step("writable disk grown")
	}

	if off, err := boot.SwapOff(); err != nil {
		s.warn("swap: %v", err)
	} else if len(off) > 0 {
		s.warn("swap areas turned off: %s", strings.Join(off, ", "))
	}
	if !cfg.NoLockdown {
		applied, err := boot.ApplySysctls("/proc/sys", boot.LockdownSysctls())
		s.ready.Lockdown = applied
		if err != nil {
			return bi, srv, s.log, fmt.Errorf("kernel lockdown: %w", err)
		}
	} else {
		s.warn("kernel lockdown turned off by capsem.lockdown=0")
	}
	s.step("locked down")

	bi.Managed = true
	bi.Debug = cfg.Debug
	bi.Port = cfg.Port
	bi.Vsock = cfg.Vsock
	bi.Root = "/"
	bi.Ready = s.ready
	facts, err := writeBootInfo(bootInfoPath, bi)
	if err != nil {
		return bi, srv, s.log, err
	}
	if err := srv.hand(facts); err != nil {
		return bi, srv, s.log, err
	}
	return bi, srv, s.log, nil
}

// growWait bounds how long the boot waits for the writable disk's
// filesystem to grow. Measured under TCG: 1 to 2 GiB took 27 ms, 2 to
// 64 GiB 0.4 s, 64 to 1,100 GiB 17 s and 1 to 4,000 GiB about two
// minutes (the kernel writes every new block group's metadata), while the
// host gives the whole boot 60 s (hypervisor.DefaultBootTimeout) and a
// 30 s wait already made a boot on a loaded machine take 53 s. A growth
// past the wait goes on in the background, the guest offered meanwhile; a
// stop in the middle is safe (the resize is journaled, the next boot
// resumes it, both tried).
const growWait = 10 * time.Second

// growResult is what boot.GrowDisk did.
type growResult struct {
	g   boot.Growth
	err error
}

// collectGrowth puts the outcome of the writable disk's growth into Ready:
// the new size in Root, a failure in Warnings (and on the console). A
// growth still running after growWait is left to finish, and says how it
// ended on the console.
func (s *stepper) collectGrowth(grown chan growResult) {
	report := func(r growResult) {
		switch {
		case r.err != nil:
			s.warn("writable disk: %v (the filesystem keeps its size)", r.err)
		case r.g.Grew():
			s.ready.Root += ", the writable disk " + r.g.String()
		}
	}
	select {
	case r := <-grown:
		report(r)
	case <-time.After(growWait):
		s.warn("writable disk: its filesystem is still growing after %v; it goes on in the background (df shows the size so far)", growWait)
		log := s.log
		go func() {
			if r := <-grown; r.err != nil {
				log.Warn("writable disk: growing its filesystem failed; it keeps its size", "err", r.err)
			} else {
				log.Warn("writable disk: its filesystem finished growing in the background", "size", r.g.String())
			}
		}()
	}
}

// openConsole returns /dev/console, and makes it the standard output and
// error of PID 1 (and so of the server) when the kernel left them closed
// (an initramfs without a dev/console node).
func openConsole() *os.File {
	c, err := os.OpenFile("/dev/console", os.O_WRONLY|unix.O_NOCTTY, 0)
	if err != nil {
		return os.Stderr
	}
	for _, fd := range []int{1, 2} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			_ = unix.Dup3(int(c.Fd()), fd, 0)
		}
	}
	return c
}

// server is the `capsem-agent serve` process PID 1 started.
type server struct {
	pid   int
	facts *os.File // the write end of the boot-facts pipe, until handed over
}

// startServer starts `capsem-agent serve --boot-fd 3`: it initialises
// while PID 1 finishes booting and reads the boot facts from the pipe on
// its fd 3 once PID 1 writes and closes it.
func startServer(log *slog.Logger) (*server, error) {
	null, err := os.Open("/dev/null")
	if err != nil {
		return nil, fmt.Errorf("open /dev/null: %w", err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("boot-facts pipe: %w", err)
	}
	defer r.Close()
	// /proc/self/exe still runs the initramfs's binary after switch_root
	// deleted it.
	p, err := os.StartProcess("/proc/self/exe", []string{"capsem-agent", "serve", "--boot-fd", "3"}, &os.ProcAttr{
		Dir:   "/",
		Env:   []string{}, // nothing of PID 1's environment
		Files: []*os.File{null, os.Stdout, os.Stderr, r},
	})
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("start the server: %w", err)
	}
	pid := p.Pid
	_ = p.Release() // reaped by superviseServer, by pid
	return &server{pid: pid, facts: w}, nil
}

// hand gives the server the boot facts.
func (s *server) hand(facts []byte) error {
	_, err := s.facts.Write(facts)
	if cerr := s.facts.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("hand the boot facts to the server: %w", err)
	}
	return nil
}

// abort makes a server that has not had the facts give up (it reads an
// empty pipe) and kills it.
func (s *server) abort() {
	s.facts.Close()
	_ = unix.Kill(s.pid, unix.SIGKILL)
}

// superviseServer reaps every process until the server exits and returns
// its status. SIGTERM or SIGINT to PID 1 ends it.
func superviseServer(srv *server, log *slog.Logger) string {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGPWR)
	pid := srv.pid
	go func() {
		for sig := range sigs {
			log.Warn("PID 1 got a signal; stopping the server", "signal", sig)
			_ = unix.Kill(pid, unix.SIGTERM)
		}
	}()
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			log.Error("wait", "err", err)
			return err.Error()
		}
		if wpid != pid {
			continue // an orphan, reaped
		}
		if ws.Signaled() {
			return "killed by " + ws.Signal().String()
		}
		return fmt.Sprintf("exit %d", ws.ExitStatus())
	}
}

// stopEverything ends every remaining process (TERM, then KILL), reaping
// them, and flushes the filesystems.
func stopEverything(bi bootInfo, log *slog.Logger) {
	_ = unix.Kill(-1, unix.SIGTERM) // every process but PID 1
	if !reapAll(500 * time.Millisecond) {
		_ = unix.Kill(-1, unix.SIGKILL)
		reapAll(500 * time.Millisecond)
	}
	unix.Sync()
	if bi.Workspace != "" {
		if err := unix.Unmount(bi.Workspace, 0); err != nil {
			log.Debug("unmount the workspace", "err", err)
		}
	}
}

// reapAll reaps children until none is left (true) or timeout passes.
func reapAll(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.ECHILD) {
			return true
		}
		if pid > 0 {
			continue
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
