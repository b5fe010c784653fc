package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/cmd/internal/storeflags"
	"github.com/capsem/capsem/guest/arch"
	"github.com/capsem/capsem/guest/image"
	"github.com/capsem/capsem/sandbox"
	"github.com/capsem/capsem/sandbox/home"
	"github.com/capsem/capsem/sandbox/supervisor"
)

// Defaults of a new sandbox.
const (
	defaultCPUs      = 2
	defaultMemoryMiB = 2048
	defaultDiskGiB   = 8
)

func startCommand() *cli.Command {
	return &cli.Command{
		Name:  "start",
		Usage: "create a long-lived sandbox, or start a stopped one again with what it kept",
		UsageText: "capsem start [--dry-run [--json]] [--policy FILE] [--workspace DIR] [--env K=V]… [--secret NAME[@HOST,…]]… [--cpus N] [--memory MiB] [--disk GiB] [--publish SPEC]… [--cold] [--foreground] NAME\n" +
			"   capsem start --from SANDBOX[@TAG] [--policy FILE] [--workspace DIR] [--env K=V]… [--secret NAME[@HOST,…]]… [--disk GiB] [--publish SPEC]… [--foreground] NEW\n" +
			"   NAME: 1 to 63 of a-z, 0-9 and '-', starting with a letter or digit",
		Description: "The first start creates the sandbox under --data (sandboxes/NAME): its settings, the guest image it\n" +
			"keeps using until capsem rm, and a disk of --disk GiB that holds everything the guest writes outside\n" +
			"/tmp and /workspace (/root, /etc, /usr/local, /var, what apt, pip and npm install), kept across\n" +
			"stop and start. Later starts reuse the stored settings; flags given to a restart replace the stored\n" +
			"ones (--disk may only grow it). capsem start returns once the guest's agent answers, leaving a\n" +
			"supervisor process running the sandbox (its log: sandboxes/NAME/supervisor.log); --foreground runs\n" +
			"that supervisor in place instead, until capsem stop or SIGTERM (for systemd, containers, schedulers).\n" +
			"A suspended sandbox (capsem suspend) resumes with its processes; --cold discards its saved guest and boots.\n" +
			"--from starts NEW from a snapshot (capsem snapshot; the newest without @TAG): the same processes, memory\n" +
			"and files, its own copy of the disk, its own network and session, a fresh RNG and the clock set to now.\n" +
			"NEW keeps SANDBOX's settings but for the flags given; the guest holds SANDBOX's secret placeholders,\n" +
			"and NEW binds them to the real values it finds (--secret, as SANDBOX was started, by default).\n" +
			"Exit status: 0 running, 1 already running or failed to start, 2 bad flags or name.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "policy", Usage: "policy `FILE` (default: the AI providers' APIs only)"},
			&cli.StringFlag{Name: "workspace", Usage: "host `DIR` shared as /workspace (default at creation: the current directory)"},
			&cli.StringSliceFlag{Name: "env", Usage: "`K=V` for every command in the sandbox (repeatable; on a restart the whole list is replaced)"},
			secretFlag(),
			&cli.IntFlag{Name: "cpus", Value: defaultCPUs, Usage: "guest vCPUs"},
			&cli.IntFlag{Name: "memory", Value: defaultMemoryMiB, Usage: "guest memory in `MiB`"},
			publishCLIFlag(),
			archFlag(),
			&cli.IntFlag{Name: "disk", Value: defaultDiskGiB, Usage: "the writable disk's cap in `GiB` (the host file is sparse: it takes what the guest wrote)"},
			&cli.BoolFlag{Name: "foreground", Usage: "run the supervisor in this process until the sandbox stops"},
			&cli.StringFlag{Name: "from", Usage: "start the new sandbox from `SANDBOX[@TAG]`'s snapshot (the newest without @TAG)"},
			&cli.BoolFlag{Name: "cold", Usage: "boot the guest: a suspended sandbox's saved guest is discarded"},
			dataFlag(),
			caDirFlag(),
			logLevelFlag(),
		}, append(storeFlags(), dryRunFlags()...)...),
		Action: startAction,
	}
}

func startAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError{fmt.Errorf("want one sandbox NAME after the options (capsem start [OPTIONS] NAME), got %d arguments", c.NArg())}
	}
	name := c.Args().First()
	if err := checkSandboxName(name); err != nil {
		return err
	}
	data := c.String("data")
	d := home.New(data, name)
	if c.Bool("dry-run") {
		if c.IsSet("from") {
			return usageError{errors.New("--dry-run does not plan a fork (--from): capsem snapshots SANDBOX lists what a fork starts from")}
		}
		return startPlan(c, d)
	}
	if c.Bool("json") {
		return usageError{errors.New("--json goes with --dry-run")}
	}
	d.AwaitCrashedExit(10 * time.Second)
	if d.Locked() {
		return home.AlreadyRunningError{Name: name}
	}
	if _, err := superviseOptionsFrom(c); err != nil {
		return err
	}
	a, err := sandboxArch(c, d)
	if err != nil {
		return err
	}
	if err := sandbox.CheckHypervisor(a); err != nil {
		return err
	}
	fresh := !d.Exists()
	if from := c.String("from"); from != "" {
		if err := forkSandbox(c, d, from); err != nil {
			return err
		}
	} else if err := prepareSandbox(c, d); err != nil {
		return err
	}
	opts, _ := superviseOptionsFrom(c)
	bootSnap := ""
	if fresh && c.String("from") == "" && !opts.Cold {
		// A new sandbox's guest is the boot snapshot's, restored: it
		// answers in a fraction of a boot.
		var err error
		if bootSnap, err = supervisor.FromBoot(c.Context, d, bootSnapshotRoot(), opts); err != nil {
			fmt.Fprintf(c.App.ErrWriter, "capsem: warning: the boot snapshot could not be used (%v); booting the kernel\n", err)
		}
	}
	err = launchSupervisor(c, d, opts)
	// Only a failed restore falls back to a cold boot: any other failure
	// (a bad secret, a host port in use) would fail it the same way, and
	// would cost the shared boot snapshot for nothing.
	var re supervisor.RestoreError
	if err != nil && bootSnap != "" && errors.As(err, &re) && c.Context.Err() == nil {
		fmt.Fprintf(c.App.ErrWriter, "capsem: warning: the boot snapshot could not be restored (%v); booting the kernel\n", err)
		_ = os.RemoveAll(bootSnap) // made again next time
		opts.Cold = true
		err = launchSupervisor(c, d, opts)
	}
	return err
}

// sandboxArch is the architecture sandbox d runs: --arch when given, else
// its settings' when it exists, else the host's.
func sandboxArch(c *cli.Context, d home.Dir) (arch.Arch, error) {
	if !c.IsSet("arch") && d.Exists() {
		if s, err := d.ReadSettings(); err == nil {
			return s.GuestArch(), nil
		}
	}
	a, err := guestArch(c)
	if err != nil {
		return "", usageError{err}
	}
	return a, nil
}

// launchSupervisor runs the sandbox's supervisor: in place with
// --foreground, else detached (spawnSupervisor).
func launchSupervisor(c *cli.Context, d home.Dir, opts supervisor.Options) error {
	if c.Bool("foreground") {
		return supervisor.Run(c.Context, c.String("data"), d.Name, opts, func(m supervisor.Ready) {
			if m.OK {
				fmt.Fprintf(c.App.ErrWriter, "capsem: sandbox %s is running; capsem stop %s (or SIGTERM) stops it\n", d.Name, d.Name)
			}
		})
	}
	return spawnSupervisor(c, d, opts.Cold)
}

// prepareSandbox creates the sandbox's directory, settings, image and disk
// the first time, and applies the flags given to a restart.
func prepareSandbox(c *cli.Context, d home.Dir) error {
	s, fresh, err := resolveSettings(c, d, nil)
	if err != nil {
		return err
	}
	return supervisor.Prepare(c.Context, d, s, fresh, func() (*image.Guest, error) {
		return defaultGuest(c.Context, c.App.ErrWriter, false, s.GuestArch())
	})
}

// forkSandbox makes sandbox d from start's --from snapshot, with the
// source's settings and the flags given.
func forkSandbox(c *cli.Context, d home.Dir, from string) error {
	if d.Exists() {
		return fmt.Errorf("sandbox %s exists: --from makes a new one (capsem rm %s, or another name)", d.Name, d.Name)
	}
	src, tag, err := splitFrom(dataOf(c), from)
	if err != nil {
		return err
	}
	base, err := src.ReadSettings()
	if err != nil {
		return err
	}
	// The guest's CPUs and memory are the snapshot's, which the source
	// may have changed since (start --memory).
	_, m, err := src.FindSnapshot(tag)
	if err != nil {
		return err
	}
	base.CPUs, base.MemoryMiB = m.CPUs, m.MemoryMiB
	s, _, err := resolveSettings(c, d, &base)
	if err != nil {
		return err
	}
	return supervisor.Fork(c.Context, src, tag, d, s)
}

// resolveSettings is the sandbox's settings as a start with c's flags
// makes them: the stored ones with the given flags applied, or a new
// sandbox's — from base's when it is a fork. It checks the flags and
// changes nothing.
func resolveSettings(c *cli.Context, d home.Dir, base *home.Settings) (s home.Settings, fresh bool, err error) {
	fresh = !d.Exists()
	switch {
	case base != nil:
		s = *base
		s.Name, s.Created, s.Image = d.Name, time.Now().UTC(), ""
	case fresh:
		s = home.Settings{Name: d.Name, Created: time.Now().UTC(), CPUs: defaultCPUs, MemoryMiB: defaultMemoryMiB, DiskGiB: defaultDiskGiB}
	default:
		if s, err = d.ReadSettings(); err != nil {
			return s, fresh, err
		}
	}
	given := func(flag string) bool { return (fresh && base == nil) || c.IsSet(flag) }
	if given("arch") {
		a, err := guestArch(c)
		if err != nil {
			return s, fresh, usageError{err}
		}
		if !(fresh && base == nil) && a != s.GuestArch() {
			return s, fresh, usageError{fmt.Errorf("sandbox %s is %s (its image, its disk and its snapshots): --arch %s cannot change it; make a new sandbox", d.Name, s.GuestArch(), a)}
		}
		s.Arch = a
	}
	if given("policy") {
		p := c.String("policy")
		if p != "" {
			abs, err := filepath.Abs(p)
			if err != nil {
				return s, fresh, err
			}
			p = abs
		}
		s.Policy = p
	}
	if given("secret") {
		s.Secrets = c.StringSlice("secret")
	}
	{
		// Checked here, in the environment the supervisor inherits: a
		// missing real value is told now, not in its log.
		pol, err := sandbox.LoadBoundPolicy(s.Policy, s.Secrets, nil)
		if err != nil {
			return s, fresh, err
		}
		env := s.Env
		if given("env") {
			if env, err = guestEnv(nil, c.StringSlice("env")); err != nil {
				return s, fresh, usageError{err}
			}
		}
		if _, err := sandbox.SecretEnv(pol, env); err != nil {
			return s, fresh, err
		}
	}
	if given("workspace") {
		ws := c.String("workspace")
		if ws == "" {
			var err error
			if ws, err = os.Getwd(); err != nil {
				return s, fresh, err
			}
		}
		abs, err := filepath.Abs(ws)
		if err != nil {
			return s, fresh, err
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			return s, fresh, usageError{fmt.Errorf("--workspace %s: not a directory", abs)}
		}
		s.Workspace = abs
	}
	if given("env") {
		env, err := guestEnv(nil, c.StringSlice("env"))
		if err != nil {
			return s, fresh, usageError{err}
		}
		s.Env = env
	}
	if given("cpus") {
		if s.CPUs = c.Int("cpus"); s.CPUs < 1 {
			return s, fresh, usageError{fmt.Errorf("--cpus %d: want at least 1", s.CPUs)}
		}
	}
	if given("memory") {
		if s.MemoryMiB = c.Int("memory"); s.MemoryMiB < 256 {
			return s, fresh, usageError{fmt.Errorf("--memory %d: want at least 256 MiB", s.MemoryMiB)}
		}
	}
	if base != nil {
		// Two sandboxes cannot hold one host port: a fork publishes only
		// what its own --publish says.
		s.Ports = nil
	}
	if given("publish") {
		specs, err := publishFlag(c)
		if err != nil {
			return s, fresh, err
		}
		s.Ports = nil
		for _, sp := range specs {
			s.Ports = append(s.Ports, sp.String())
		}
	}
	if given("disk") {
		n := c.Int("disk")
		if n < 1 {
			return s, fresh, usageError{fmt.Errorf("--disk %d: want at least 1 GiB", n)}
		}
		if (!fresh || base != nil) && n < s.DiskGiB {
			return s, fresh, usageError{fmt.Errorf("--disk %d: the disk is %d GiB and cannot shrink (capsem rm %s, then start it with --disk %d, makes a new one)", n, s.DiskGiB, d.Name, n)}
		}
		s.DiskGiB = n
	}
	return s, fresh, nil
}

// spawnSupervisor starts the sandbox's supervisor detached, as capsem
// supervise with this start's flags, and waits for it to report.
func spawnSupervisor(c *cli.Context, d home.Dir, cold bool) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	args := append([]string{"supervise", "--data", c.String("data"), "--ca-dir", c.String("ca-dir"), "--log-level", c.String("log-level")},
		storeflags.Pass(c)...)
	if cold {
		args = append(args, "--cold")
	}
	args = append(args, d.Name)
	return supervisor.Spawn(d, exe, args)
}
