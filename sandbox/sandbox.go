package sandbox

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/capsem/capsem/ask"
	"github.com/capsem/capsem/filter"
	"github.com/capsem/capsem/guest/bootparam"
	"github.com/capsem/capsem/guest/image"
	"github.com/capsem/capsem/guest/proto"
	"github.com/capsem/capsem/hypervisor"
	"github.com/capsem/capsem/mitm/ca"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// Config is what one guest boot needs.
type Config struct {
	Guest     *image.Guest
	Policy    *policy.Policy
	Workspace string // host directory shared as the guest's /workspace
	// DataDisk is an ext4 image that holds the writable layer over the
	// read-only root, so what the guest writes outside /tmp and /workspace
	// outlives the boot. "": a tmpfs, gone at power-off.
	DataDisk string
	// TransferDisk is a file of TransferDiskSize bytes that PutFile and
	// GetFile pass file contents through (it needs DataDisk). "": they use
	// the control channel, several times slower.
	TransferDisk string
	CPUs         int
	MemoryMiB    int
	Recorder     netstack.Recorder // gets every event of the run: the session's store.Writer, or a tap on it
	Authority    *ca.Authority     // the interception CA the guest trusts
	ConsoleLog   string
	ConsoleMax   int64 // the console log's cap in bytes (0: hypervisor.DefaultConsoleLogMax)
	BootTimeout  time.Duration
	Logger       *slog.Logger
	// Host names the host side to the agent in the handshake ("capsem
	// v1.2.3").
	Host string
	// RAMFile holds the guest's RAM (hypervisor.Config.RAMFile): set, the
	// sandbox can be saved (Save). "": it cannot.
	RAMFile string
	// Restore starts the guest from a save instead of booting it.
	Restore *Restore
	// DeferWorkspace boots with the workspace device attached but not
	// mounted (bootparam WSDefer): the first Thaw mounts it. A boot
	// snapshot is taken so, before any workspace is mounted.
	DeferWorkspace bool
	// Overlay keeps the sandbox's "always" answers (filter.Config.Overlay).
	// Nil: none is kept.
	Overlay filter.Overlay
}

// Restore is a save to start from: the directory Save wrote and what it
// said.
type Restore struct {
	Dir   string
	Saved Saved
	// Origin says where the guest comes from, for the session's record
	// ("snapshot a@t1 of session …"); "" records nothing (a boot
	// snapshot's guest is a booted guest).
	Origin string
	// Private maps the saved RAM copy-on-write (hypervisor.Restore):
	// quicker, but the sandbox cannot be saved again.
	Private bool
}

// Sandbox is a running guest: its VM, the netstack its NIC ends in, the
// MITM behind the netstack, and the control connection to its agent.
type Sandbox struct {
	cfg    Config
	log    *slog.Logger
	net    *filter.Filter // the netstack, the MITM and the MCP gateway
	nic    netstack.FrameConn
	vm     hypervisor.VM
	client *proto.Client
	guest  *guestRecord // the record of what the agent reports and does
	xfer   *transfer    // the transfer disk's host side, or nil
	saveMu sync.Mutex   // one Save at a time

	watchCancel context.CancelFunc // stops the agent watchdog
	watchDone   chan struct{}

	cancel    context.CancelFunc // ends the VM and the netstack
	vmDone    chan error         // the VM's Wait result
	serveDone chan error         // the netstack's Serve result
}

// GuestBoot is what the agent needs on the kernel command line: the static
// network of docs/DESIGN.md (no DHCP round trip at boot) and the CA, which
// rides there so that the agent installs it while the guest's NIC and
// workspace come up rather than after the handshake. The backend adds the
// root device and the workspace filesystem.
func GuestBoot(mtu uint32, ca []byte, debug bool) bootparam.BootParams {
	return bootparam.BootParams{
		IP:      netip.PrefixFrom(netstack.GuestIP, 24),
		Gateway: netstack.GatewayIP,
		DNS:     []netip.Addr{netstack.GatewayIP},
		MTU:     int(mtu),
		CA:      pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca}),
		Debug:   debug, // the agent's steps, with uptimes, in the console log
	}
}

// Start boots the guest and completes the handshake with its agent. On
// error everything it started is stopped again.
func Start(ctx context.Context, cfg Config) (sb *Sandbox, err error) {
	log := cfg.Logger
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	sb = &Sandbox{cfg: cfg, log: log, cancel: cancel, guest: newGuestRecord(cfg.Recorder, log)}
	defer func() {
		if err != nil {
			sb.teardown()
			sb = nil
		}
	}()

	log.Debug("starting the netstack and the MITM")
	mtu := uint32(netstack.DefaultMTU)
	sb.net, err = filter.New(filter.Config{
		Policy:    cfg.Policy,
		Recorder:  cfg.Recorder,
		Authority: cfg.Authority,
		Logger:    log,
		MTU:       mtu,
		Overlay:   cfg.Overlay,
	})
	if err != nil {
		return sb, err
	}
	nic, vmNIC, err := newNIC()
	if err != nil {
		return sb, fmt.Errorf("guest NIC: %w", err)
	}
	defer vmNIC.Close() // the backend has its own copy after Start
	sb.nic = nic
	sb.serveDone = make(chan error, 1)
	go func() { sb.serveDone <- sb.net.Serve(ctx, nic) }()

	vmCfg := hypervisor.Config{
		Kernel:        cfg.Guest.Kernel,
		Initramfs:     cfg.Guest.Initramfs,
		RootImage:     cfg.Guest.Rootfs,
		Boot:          GuestBoot(mtu, cfg.Authority.Certificate().Raw, log.Enabled(ctx, slog.LevelDebug)),
		Cmdline:       []string{"debugfs=off"}, // no kernel internals for a guest root to poke at
		CPUs:          cfg.CPUs,
		MemoryMiB:     cfg.MemoryMiB,
		NIC:           vmNIC,
		DataDisk:      cfg.DataDisk,
		TransferDisk:  cfg.TransferDisk,
		Workspace:     cfg.Workspace,
		BootTimeout:   cfg.BootTimeout,
		ConsoleLog:    cfg.ConsoleLog,
		ConsoleLogMax: cfg.ConsoleMax,
		RAMFile:       cfg.RAMFile,
	}
	vmCfg.Boot.WSDefer = cfg.DeferWorkspace
	if r := cfg.Restore; r != nil {
		ram, compressed := savedRAM(r.Dir)
		vmCfg.Restore = &hypervisor.Restore{
			State: filepath.Join(r.Dir, StateFile), RAM: ram, Compressed: compressed,
			Private: r.Private, Machine: r.Saved.Machine,
		}
	}
	if cfg.TransferDisk != "" {
		if sb.xfer, err = openTransfer(cfg.TransferDisk); err != nil {
			return sb, err
		}
	}
	vm, err := newVM(vmCfg, log)
	if err != nil {
		return sb, err
	}
	log.Debug("starting the VM")
	if err := vm.Start(ctx); err != nil {
		return sb, err
	}
	log.Debug("VM started")
	sb.vm = vm
	sb.vmDone = make(chan error, 1)
	go func() { sb.vmDone <- vm.Wait() }()

	hctx, hcancel := context.WithTimeout(ctx, cfg.BootTimeout)
	defer hcancel()
	copts := proto.ClientOptions{Host: cfg.Host, OnEvent: sb.record, Logger: log}
	if r := cfg.Restore; r != nil {
		var th proto.Thawed
		sb.client, th, err = proto.Resume(hctx, vm.Control(), copts, r.Saved.Agent, r.Saved.Ready, thawNow(true))
		for _, w := range th.Warnings {
			log.Warn("guest: " + w)
		}
	} else {
		sb.client, err = proto.NewClient(hctx, vm.Control(), copts)
	}
	if err != nil {
		return sb, sb.bootError(err)
	}
	for _, w := range sb.client.Ready().Warnings {
		log.Warn("guest: " + w)
	}
	if cfg.DataDisk != "" && !strings.Contains(sb.client.Ready().Root, "ext4") {
		// An agent that does not know capsem.rw keeps the writable layer
		// in a tmpfs: everything written would be lost at stop.
		return sb, fmt.Errorf("boot the guest: its agent did not put the root's writable layer on the data disk (root: %q); the guest image predates writable disks: remove the sandbox and create it again", sb.client.Ready().Root)
	}
	if r := cfg.Restore; r != nil && r.Origin != "" {
		sb.guest.agent(store.AgentRestored, 1, r.Origin+"; the guest's network flows were reset")
	}
	wctx, wcancel := context.WithCancel(ctx)
	sb.watchCancel, sb.watchDone = wcancel, make(chan struct{})
	go func() {
		defer close(sb.watchDone)
		sb.guest.watch(wctx, sb.client, func(error) {
			// A guest that breaks the protocol is not trusted to power
			// itself off.
			sb.stopVM()
		})
	}()
	return sb, nil
}

// Exec starts a command in the guest and records it, from what the host
// sent and saw, once it ends. Any number may run at once. TERM and LANG
// get their defaults (execenv.go) when ex.Env does not set them.
func (sb *Sandbox) Exec(ctx context.Context, ex proto.Exec) (*proto.Session, error) {
	ex.Env = withExecDefaults(ex.Env, ex.TTY)
	sent := time.Now()
	s, err := sb.client.Exec(ctx, ex)
	if err != nil {
		sb.guest.execFailed(ex, sent, err)
		return nil, err
	}
	sb.guest.execStarted(s)
	return s, nil
}

// bootError explains a failed boot: what the VM said, and where its
// console log is.
func (sb *Sandbox) bootError(err error) error {
	select {
	case verr := <-sb.vmDone:
		sb.vmDone <- verr
		if verr != nil {
			err = fmt.Errorf("%w; the VM ended: %w", err, verr)
		} else {
			err = fmt.Errorf("%w; the guest powered off during boot", err)
		}
	case <-time.After(200 * time.Millisecond):
	}
	if tail := ConsoleTail(sb.cfg.ConsoleLog, 15); tail != "" {
		err = fmt.Errorf("%w\nlast lines of the guest console (%s):\n%s", err, sb.cfg.ConsoleLog, tail)
	}
	return fmt.Errorf("boot the guest: %w", err)
}

// ConsoleTail returns the last n lines of the console log, indented.
func ConsoleTail(path string, n int) string {
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// record turns the agent's reports into store events. Its ExecEvents are
// ignored: exec records are the host's own (exec). Errors without a session
// are logged by the client, rate-limited.
func (sb *Sandbox) record(m proto.Message) {
	if m, ok := m.(proto.FileEvent); ok {
		sb.guest.fileEvent(m)
	}
}

// probeTimeout is how long a probe of the agent (Responsive) waits for
// its Pong. Under TCG a busy guest answers in 2–40 ms (pytest running);
// 2 s is 50 times that — a host loaded twice as much as the one measured
// does not make a healthy guest look deaf, and fail a run at its first
// Ctrl-C — and short enough that stop, --timeout and Ctrl-C against a
// guest that stopped reading end within 5 s.
const probeTimeout = 2 * time.Second

// Responsive pings the agent and returns nil once it answers, or an error
// after probeTimeout (or ctx), which is then on record (agent silent). The
// agent handles the host's messages in order, so an answer also confirms
// that everything sent before the probe — a signal — reached it.
func (sb *Sandbox) Responsive(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if _, err := sb.client.Ping(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			sb.guest.setSilent(true, fmt.Sprintf("the agent did not answer a ping within %s", probeTimeout))
		}
		return fmt.Errorf("the guest agent does not answer (%w): the guest is not reading its control channel", err)
	}
	sb.guest.setSilent(false, "")
	return nil
}

// Shutdown powers the guest off through its agent (which syncs and
// unmounts the workspace, so every write the guest made is on the host),
// telling it why, then stops everything. An agent that is silent, or does
// not answer a probe first, is not waited for: the VM is stopped at once.
// It is safe to call on a sandbox that is partly gone.
func (sb *Sandbox) Shutdown(why string) {
	if sb.client != nil && !sb.guest.isSilent() && sb.Responsive(context.Background()) == nil {
		if err := sb.client.Shutdown(why); err == nil {
			select {
			case <-sb.client.Done():
				sb.log.Debug("control channel closed by the guest")
			case <-time.After(5 * time.Second):
				sb.log.Warn("the guest did not power off within 5 s; stopping it")
			}
		}
	}
	if sb.vmDone != nil && sb.client != nil && sb.client.Err() != nil {
		// The control channel is gone: the guest is powering off, or it
		// was cut off and is being stopped.
		select {
		case err := <-sb.vmDone:
			sb.vmDone <- err
			sb.log.Debug("VM exited", "err", err)
		case <-time.After(3 * time.Second):
		}
	}
	sb.teardown()
	sb.log.Debug("sandbox torn down")
}

// stopWatch ends the agent watchdog (which records what is pending) and
// waits for the exec records, so that all of them precede the session's
// end.
func (sb *Sandbox) stopWatch() {
	if sb.watchCancel != nil {
		sb.watchCancel()
		<-sb.watchDone
	}
	sb.guest.wait()
}

// stopVM stops the VM, killing it when it has not stopped within 2 s.
func (sb *Sandbox) stopVM() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = sb.vm.Stop(ctx)
	cancel()
}

// teardown stops the VM (killing it if needed), the netstack, the MITM and
// the MCP gateway.
func (sb *Sandbox) teardown() {
	if sb.vm != nil {
		sb.stopVM()
	}
	if sb.client != nil {
		_ = sb.client.Close()
	}
	sb.stopWatch()
	sb.cancel()
	if sb.net != nil {
		_ = sb.net.Close() // the gateway's stdio servers stop with the sandbox
	}
	if sb.nic != nil {
		_ = sb.nic.Close()
	}
	if sb.serveDone != nil {
		if err := <-sb.serveDone; err != nil && !errors.Is(err, context.Canceled) {
			sb.log.Debug("netstack ended", "err", err)
		}
	}
	if sb.xfer != nil {
		_ = sb.xfer.close()
	}
}

// Ready is what the agent said in the handshake.
func (sb *Sandbox) Ready() proto.Ready { return sb.client.Ready() }

// Done is closed once the control connection to the agent is gone: the
// guest powered off, crashed or was stopped.
func (sb *Sandbox) Done() <-chan struct{} { return sb.client.Done() }

// Err says why the control connection ended (nil while it runs): wrapping
// proto.ErrViolation when the agent was cut off and the VM stopped.
func (sb *Sandbox) Err() error { return sb.client.Err() }

// SetPolicy swaps the policy, with the asked answers laid over it
// (filter.Filter.SetPolicy): flows, queries and requests that start after
// the call see the new one; those under way keep theirs. A gateway server
// the new policy removes or changes is stopped.
func (sb *Sandbox) SetPolicy(p *policy.Policy) error { return sb.net.SetPolicy(p) }

// Asks is the broker of the guest's questions (filter.Filter.Asks).
func (sb *Sandbox) Asks() *ask.Broker { return sb.net.Asks() }

// Inbound carries a connection accepted on a published host port into
// the guest, recorded as an inbound flow (netstack.Stack.Inbound); the
// sandbox is a ports.Carrier.
func (sb *Sandbox) Inbound(ctx context.Context, client net.Conn, in netstack.Inbound) error {
	return sb.net.Inbound(ctx, client, in)
}

// Policy is the policy new flows see.
func (sb *Sandbox) Policy() *policy.Policy { return sb.net.Policy() }
