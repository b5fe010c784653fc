package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/cmd/internal/loglevel"
	"github.com/capsem/capsem/cmd/internal/storeflags"
	"github.com/capsem/capsem/filter"
	"github.com/capsem/capsem/mitm/ca"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/ports"
	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/otlp"
	"github.com/capsem/capsem/version"
)

// exitUsage is the exit status for bad flags or a bad policy file.
const exitUsage = 2

// usageError marks errors that exit with status 2.
type usageError struct{ error }

func usagef(format string, a ...any) error {
	return usageError{fmt.Errorf(format, a...)}
}

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	err := app.Run(args)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "capsem-net: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 1
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:    "capsem-net",
		Usage:   "capsem's network filter for any VM: fake DNS, port/IP blocking and an event log, in a userspace TCP/IP stack",
		Version: version.String(),
		Description: "Point a VM's NIC at one --listen-* socket. The guest gets 198.18.0.2/24 by DHCP, gateway and DNS\n" +
			"198.18.0.1. Only names the policy allows resolve (to synthetic addresses in 198.19.0.0/16), only\n" +
			"allowed ports to them connect; everything else is refused and logged to the event store.\n" +
			"SIGHUP reloads the policy; SIGINT/SIGTERM flush the events and exit 0.",
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "policy", Usage: "policy `FILE` (TOML); without it everything is denied"},
			&cli.StringFlag{Name: "data", Value: store.DefaultDir(), Usage: "event store `DIR`"},
			&cli.StringFlag{Name: "listen-qemu", Usage: "QEMU stream socket: unix:///`PATH` (-netdev stream)"},
			&cli.StringFlag{Name: "listen-vfkit", Usage: "vfkit datagram socket: unixgram:///`PATH`"},
			&cli.StringFlag{Name: "listen-bess", Usage: "bess packet socket: unixpacket:///`PATH`"},
			&cli.IntFlag{Name: "listen-fd", Value: -1, Usage: "inherited socket `N`: listening unix socket, or a connected stream/datagram socket"},
			&cli.UintFlag{Name: "mtu", Value: netstack.DefaultMTU, Usage: "guest link MTU, 576..65520"},
			&cli.StringFlag{Name: "pcap", Usage: "write every frame, both ways, to pcap `FILE`"},
			&cli.StringSliceFlag{Name: "forward-sock", Usage: "a host unix socket `PATH` forwarded to a guest socket over SSH, as gvproxy does (repeatable; with --forward-dest, --forward-user, --forward-identity)"},
			&cli.StringSliceFlag{Name: "forward-dest", Usage: "the guest socket `PATH` of the --forward-sock of the same rank"},
			&cli.StringSliceFlag{Name: "forward-user", Usage: "the guest `USER` to SSH as, for the --forward-sock of the same rank"},
			&cli.StringSliceFlag{Name: "forward-identity", Usage: "the SSH private key `FILE`, for the --forward-sock of the same rank"},
			&cli.StringFlag{Name: "services", Usage: "serve gvproxy's port-forwarder API on unix:///`PATH` or tcp://127.0.0.1:PORT (what podman machine and crc call to publish guest ports)"},
			&cli.DurationFlag{Name: "dial-timeout", Value: netstack.DefaultDialTimeout, Usage: "how long an allowed flow's upstream connect may take while the guest's SYN waits"},
			&cli.IntFlag{Name: "max-flows", Value: netstack.DefaultMaxFlows, Usage: "the most TCP connections the guest may hold open at once (flows and DNS over TCP); beyond it a SYN gets a RST"},
			&cli.IntFlag{Name: "max-dns-tcp", Value: netstack.DefaultMaxDNSTCPConns, Usage: "the most DNS-over-TCP connections the guest may hold open at once; beyond it a SYN to port 53 gets a RST"},
			&cli.StringFlag{Name: "guest-mac", Usage: "pin the guest's `MAC` (default: the first MAC seen)"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
			&cli.StringFlag{Name: "ca-dir", Value: defaultCADir(), Usage: "the capsem CA's `DIR` (created on first use; the guest must trust its ca.pem)"},
			&cli.StringFlag{Name: "cpu-profile", Usage: "write a Go CPU profile to `FILE` until exit (for performance work)"},
			&cli.StringFlag{Name: "debug-addr", Hidden: true, Usage: "serve net/http/pprof on loopback `ADDR` (host:port; for bench/soakbench)"},
		}, storeflags.Flags()...),
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageError{err}
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("unexpected argument %q (see --help)", c.Args().First())
			}
			return serve(c, stdout)
		},
	}
}

// storeOptions reads the store's flags (storeflags).
func storeOptions(c *cli.Context) (store.Options, error) {
	o, err := storeflags.Options(c)
	if err != nil {
		return o, usageError{err}
	}
	return o, nil
}

func defaultCADir() string {
	dir, err := ca.DefaultDir()
	if err != nil {
		return ""
	}
	return dir
}

func listenerFromFlags(c *cli.Context) (netstack.Listener, error) {
	var specs []string
	for _, f := range []string{"listen-qemu", "listen-vfkit", "listen-bess"} {
		if c.IsSet(f) {
			specs = append(specs, f)
		}
	}
	if c.Int("listen-fd") >= 0 {
		specs = append(specs, "listen-fd")
	}
	if len(specs) != 1 {
		return nil, usagef("give exactly one of --listen-qemu, --listen-vfkit, --listen-bess, --listen-fd (got %d)", len(specs))
	}
	want := map[string]string{"listen-qemu": "unix", "listen-vfkit": "unixgram", "listen-bess": "unixpacket"}
	switch f := specs[0]; f {
	case "listen-fd":
		l, err := netstack.ListenFD(c.Int("listen-fd"))
		if err != nil {
			return nil, usageError{err}
		}
		return l, nil
	default:
		addr := c.String(f)
		if !strings.HasPrefix(addr, want[f]+"://") {
			return nil, usagef("--%s %q: want %s:///absolute/path", f, addr, want[f])
		}
		l, err := netstack.Listen(addr)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
}

func serve(c *cli.Context, stdout io.Writer) error {
	level, err := loglevel.Parse(c.String("log-level"))
	if err != nil {
		return usageError{err}
	}
	log := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: level}))

	if c.Duration("dial-timeout") <= 0 {
		return usagef("--dial-timeout %s: must be positive", c.Duration("dial-timeout"))
	}
	for _, f := range []string{"max-flows", "max-dns-tcp"} {
		if c.Int(f) <= 0 {
			return usagef("--%s %d: must be at least 1", f, c.Int(f))
		}
	}
	mtu := c.Uint("mtu")
	if mtu < 576 || mtu > netstack.MaxMTU {
		return usagef("--mtu %d: use 576..%d", mtu, netstack.MaxMTU)
	}
	var guestMAC net.HardwareAddr
	if s := c.String("guest-mac"); s != "" {
		guestMAC, err = net.ParseMAC(s)
		if err != nil || len(guestMAC) != 6 {
			return usagef("--guest-mac %q: want an Ethernet address like 52:54:00:12:34:56", s)
		}
	}
	if p := c.String("cpu-profile"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if a := c.String("debug-addr"); a != "" {
		if err := serveDebug(a, log); err != nil {
			return err
		}
	}
	policyPath := c.String("policy")
	pol := policy.DenyAll()
	if policyPath != "" {
		if pol, err = filter.LoadPolicy(policyPath, nil); err != nil {
			return usageError{err}
		}
	} else {
		log.Warn("no --policy given: every name and flow is denied")
	}
	ln, err := listenerFromFlags(c)
	if err != nil {
		return err
	}
	defer ln.Close()

	stOpt, err := storeOptions(c)
	if err != nil {
		return err
	}
	audit, err := storeflags.Audit(c)
	if err != nil {
		return usageError{err}
	}
	// The seal key signs the session's chain from Begin on: loaded before it.
	if stOpt.SealKey, err = ca.LoadOrCreateSealKey(c.String("ca-dir")); err != nil {
		return err
	}
	st, err := store.OpenWith(c.String("data"), stOpt)
	if err != nil {
		return err
	}
	defer st.Close()
	host, _ := os.Hostname()
	meta := store.Session{Command: os.Args, PolicySHA256: pol.SHA256, Host: host}
	w, err := st.Begin(meta)
	if err != nil {
		return fmt.Errorf("start session: %w", err)
	}
	var shipper *otlp.Shipper
	if audit.URL != "" {
		meta.ID = w.ID()
		audit.Resource, audit.Log = otlp.ResourceOf(meta), log
		if shipper, err = otlp.Start(st, w, audit); err != nil {
			w.End(nil)
			return usageError{err}
		}
	}

	var pcap *netstack.PCAP
	var tap netstack.FrameTap
	if p := c.String("pcap"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			return fmt.Errorf("--pcap: %w", err)
		}
		defer f.Close()
		if pcap, err = netstack.NewPCAP(f); err != nil {
			return err
		}
		tap = pcap.Tap
	}

	authority, err := ca.LoadOrCreate(c.String("ca-dir"))
	if err != nil {
		return err
	}
	fl, err := filter.New(filter.Config{
		Policy:         pol,
		Recorder:       w,
		Authority:      authority,
		Logger:         log,
		MTU:            uint32(mtu),
		GuestMAC:       guestMAC,
		Tap:            tap,
		DialTimeout:    c.Duration("dial-timeout"),
		MaxFlows:       c.Int("max-flows"),
		MaxDNSTCPConns: c.Int("max-dns-tcp"),
	})
	if err != nil {
		return err
	}
	defer fl.Close()

	// gvproxy's services API: guest ports published on the host, carried
	// in by the netstack (ports.Publisher, netstack.Stack.Inbound).
	pub := ports.New(log)
	defer pub.Close()
	pub.Attach(fl)
	if spec := c.String("services"); spec != "" {
		sl, err := listenServices(spec)
		if err != nil {
			return err
		}
		defer sl.Close()
		sctx, stopServices := context.WithCancel(c.Context)
		defer stopServices()
		serveServices(sctx, sl, pub, log)
		fmt.Fprintf(stdout, "services: gvproxy's port forwarder on %s\n", spec)
	}

	fwds, err := sshForwardsFromFlags(c.StringSlice("forward-sock"), c.StringSlice("forward-dest"), c.StringSlice("forward-user"), c.StringSlice("forward-identity"), fl, log)
	if err != nil {
		return err
	}
	fctx, stopForwards := context.WithCancel(c.Context)
	defer stopForwards()
	for _, f := range fwds {
		if err := f.serve(fctx); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "forward: %s -> the guest's %s (SSH as %s)\n", f.sock, f.dest, f.user)
	}

	fmt.Fprintf(stdout, "capsem-net %s: listening on %s, session %s, events in %s\n", version.String(), ln, w.ID(), c.String("data"))
	fmt.Fprintf(stdout, "TLS to port 443 is intercepted: the guest must trust %s\n", authority.CertPath())
	if err := writePlaceholders(c.String("data"), pol, stdout); err != nil {
		return err
	}
	if nd := ln.QEMUNetdev(); nd != "" {
		fmt.Fprintf(stdout, "QEMU: %s -device virtio-net-pci,netdev=net0\n", nd)
		if mtu > netstack.DefaultMTU {
			fmt.Fprintf(stdout, "      (and host_mtu=%d on the -device for MTU %d)\n", mtu, mtu)
		}
	}

	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		for sig := range sigs {
			if sig == syscall.SIGHUP {
				reload(log, fl, policyPath, c.String("data"))
				continue
			}
			log.Info("shutting down", "signal", sig.String())
			cancel()
			ln.Close()
			return
		}
	}()

	serveErr := acceptLoop(ctx, log, ln, fl)
	fl.Close()
	if pcap != nil {
		if err := pcap.Flush(); err != nil {
			log.Error("pcap incomplete", "err", err)
		}
	}
	if shipper != nil {
		// The collector gets what the session recorded, for up to 30 s
		// more; what it does not is in the store.
		if _, err := shipper.Close(30 * time.Second); err != nil {
			if audit.Required {
				w.End(nil)
				return err
			}
			log.Warn(err.Error())
		}
	}
	if err := w.End(nil); err != nil {
		return fmt.Errorf("flush events: %w", err)
	}
	log.Info("stopped", "session", w.ID(), "stats", fl.Snapshot())
	return serveErr
}

func acceptLoop(ctx context.Context, log *slog.Logger, ln netstack.Listener, fl *filter.Filter) error {
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accept guest: %w", err)
		}
		log.Info("guest connected")
		if err := fl.Serve(ctx, conn); err != nil {
			log.Warn("guest connection ended", "err", err)
		} else {
			log.Info("guest disconnected")
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// serveDebug serves the pprof handlers on a loopback address only: heap and
// goroutine profiles say what the process holds, which bench/soakbench
// samples. Its own mux, so nothing else registered on http.DefaultServeMux
// is exposed.
func serveDebug(addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return usagef("--debug-addr %q: %v", addr, err)
	}
	if ap, ok := ln.Addr().(*net.TCPAddr); !ok || !ap.IP.IsLoopback() {
		ln.Close()
		return usagef("--debug-addr %q: give a loopback address such as 127.0.0.1:6060", addr)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", httppprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", httppprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", httppprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", httppprof.Trace)
	go func() {
		if err := http.Serve(ln, mux); err != nil {
			log.Warn("debug server stopped", "err", err)
		}
	}()
	log.Info("pprof on loopback", "addr", ln.Addr().String())
	return nil
}

// reload applies a new policy to new flows. A broken file keeps the old
// policy: fail closed, never open.
func reload(log *slog.Logger, fl *filter.Filter, path, data string) {
	if path == "" {
		log.Warn("SIGHUP ignored: no --policy file to reload")
		return
	}
	p, err := fl.Reload(path) // the guest holds its placeholders: a reload keeps them
	if err != nil {
		log.Error("policy reload failed; keeping the previous policy", "err", err)
		return
	}
	if err := writePlaceholders(data, p, io.Discard); err != nil {
		log.Error("placeholders.json not written", "err", err)
	}
	log.Info("policy reloaded", "file", path, "sha256", p.SHA256)
}

// placeholdersFile is where capsem-net writes the placeholders of the
// secrets in force, for whoever sets up the guest's environment. Format:
// one JSON object, {"NAME": "placeholder", …}, every secret listed; mode
// 0600. Stability: tools read it; keys and shape never change.
const placeholdersFile = "placeholders.json"

// writePlaceholders writes placeholders.json in data and prints each
// secret's variable to out. Without secrets it writes nothing and removes a
// file an earlier run left.
func writePlaceholders(data string, pol *policy.Policy, out io.Writer) error {
	path := filepath.Join(data, placeholdersFile)
	ph := pol.Placeholders()
	if len(ph) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.MarshalIndent(ph, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("capsem-net: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("capsem-net: writing %s: %w", path, err)
	}
	for _, s := range pol.Secrets() {
		if x := pol.Proxy(); x != nil && x.Secret == s.Name && len(s.Hosts) == 0 {
			fmt.Fprintf(out, "secret %s: the [upstream] proxy's credentials: sent to %s only (the guest needs no variable for it)\n", s.Name, x.Addr)
			continue
		}
		fmt.Fprintf(out, "secret %s: give the guest %s=%s (real value only to %s)\n", s.Name, s.Name, s.InForce(), strings.Join(s.Hosts, ", "))
	}
	fmt.Fprintf(out, "placeholders in %s\n", path)
	return nil
}
