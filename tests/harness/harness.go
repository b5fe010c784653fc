package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capsem/capsem/netstack"
)

// Requirements returns why the harness cannot run here, or "" when it can.
// tools are extra commands the caller needs inside the namespace.
func Requirements(tools ...string) string {
	if runtime.GOOS != "linux" {
		return "needs Linux (network namespaces and TAP devices)"
	}
	if os.Geteuid() != 0 {
		return "needs root (network namespaces and TAP devices); run the tests as root, as .ci/run does"
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return "needs /dev/net/tun"
	}
	for _, t := range append([]string{"ip", "busybox"}, tools...) {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Sprintf("needs %q on PATH (apt-get install the package that provides it; .ci/run does)", t)
		}
	}
	return ""
}

var nsCounter atomic.Int64

// Namespace is a network namespace with one TAP device, tap0.
type Namespace struct {
	Name string
	TAP  *os.File
	MTU  int
}

// NewNamespace creates a namespace with a TAP device of the given MTU, up,
// with no address yet. Close removes it.
func NewNamespace(mtu int) (*Namespace, error) {
	name := fmt.Sprintf("capsem-t%d-%d", os.Getpid(), nsCounter.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip netns add %s: %v: %s", name, err, out)
	}
	ns := &Namespace{Name: name, MTU: mtu}
	// ip netns exec bind-mounts these over /etc inside the namespace.
	etc := filepath.Join("/etc/netns", name)
	if err := os.MkdirAll(etc, 0o755); err != nil {
		ns.Close()
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(etc, "resolv.conf"), []byte("nameserver 198.18.0.1\noptions timeout:2 attempts:1\n"), 0o644); err != nil {
		ns.Close()
		return nil, err
	}
	tap, err := openTAPIn(name, "tap0")
	if err != nil {
		ns.Close()
		return nil, err
	}
	ns.TAP = tap
	if err := ns.IP("link", "set", "lo", "up"); err != nil {
		ns.Close()
		return nil, err
	}
	if err := ns.IP("link", "set", "tap0", "mtu", strconv.Itoa(mtu), "up"); err != nil {
		ns.Close()
		return nil, err
	}
	return ns, nil
}

// IP runs `ip -n NS args…`.
func (ns *Namespace) IP(args ...string) error {
	out, err := exec.Command("ip", append([]string{"-n", ns.Name}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip -n %s %s: %v: %s", ns.Name, strings.Join(args, " "), err, out)
	}
	return nil
}

// Command returns cmd prepared to run inside the namespace.
func (ns *Namespace) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Run runs a command in the namespace with a timeout and returns its
// combined output.
func (ns *Namespace) Run(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := ns.Command(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	return out.String(), err
}

// Lease is what the DHCP client was given.
type Lease struct {
	IP, Mask, Router, DNS, MTU string
}

const udhcpcScript = `#!/bin/sh
case "$1" in
bound|renew)
  ip addr flush dev "$interface"
  ip addr add "$ip/$mask" dev "$interface"
  [ -n "$mtu" ] && ip link set dev "$interface" mtu "$mtu"
  for r in $router; do ip route replace default via "$r" dev "$interface"; break; done
  echo "LEASE ip=$ip mask=$mask router=$router dns=$dns mtu=$mtu"
  ;;
esac
exit 0
`

// DHCP runs busybox udhcpc on tap0 and configures the namespace from the
// lease: address, default route, MTU.
func (ns *Namespace) DHCP() (Lease, error) {
	dir, err := os.MkdirTemp("", "capsem-udhcpc")
	if err != nil {
		return Lease{}, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte(udhcpcScript), 0o755); err != nil {
		return Lease{}, err
	}
	out, err := ns.Run(30*time.Second, "busybox", "udhcpc", "-i", "tap0", "-f", "-q", "-n", "-t", "5", "-T", "1", "-O", "mtu", "-s", script)
	if err != nil {
		return Lease{}, fmt.Errorf("udhcpc: %v: %s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "LEASE ") {
			continue
		}
		var l Lease
		for _, kv := range strings.Fields(line)[1:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "ip":
				l.IP = v
			case "mask":
				l.Mask = v
			case "router":
				l.Router = v
			case "dns":
				l.DNS = v
			case "mtu":
				l.MTU = v
			}
		}
		return l, nil
	}
	return Lease{}, fmt.Errorf("udhcpc gave no lease: %s", out)
}

// Close removes the namespace and its TAP.
func (ns *Namespace) Close() error {
	if ns.TAP != nil {
		ns.TAP.Close()
	}
	os.RemoveAll(filepath.Join("/etc/netns", ns.Name))
	if out, err := exec.Command("ip", "netns", "del", ns.Name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns del %s: %v: %s", ns.Name, err, out)
	}
	return nil
}

// Pump carries frames between a TAP and a frame connection until either
// side fails or Close is called.
type Pump struct {
	tap  *os.File
	conn netstack.FrameConn
	wg   sync.WaitGroup
	once sync.Once
}

// StartPump starts carrying frames both ways.
func StartPump(tap *os.File, conn netstack.FrameConn) *Pump {
	return StartLossyPump(tap, conn, 0)
}

// StartLossyPump is StartPump on a link that loses frames toward the
// guest: every dropEvery-th frame of more than 1,000 bytes (a data
// segment, not a handshake or a pure ACK) is not delivered. 0 loses none.
func StartLossyPump(tap *os.File, conn netstack.FrameConn, dropEvery int) *Pump {
	p := &Pump{tap: tap, conn: conn}
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		over := conn.FramingOverhead()
		buf := make([]byte, over+65536+64)
		frames := make([][]byte, 1)
		for {
			n, err := tap.Read(buf[over:])
			if err != nil {
				p.Close()
				return
			}
			frames[0] = buf[over : over+n]
			if err := conn.WriteFrames(buf[:over+n], frames); err != nil {
				p.Close()
				return
			}
		}
	}()
	go func() {
		defer p.wg.Done()
		large := 0
		for {
			f, err := conn.ReadFrame()
			if err != nil {
				p.Close()
				return
			}
			if dropEvery > 0 && len(f) > 1000 {
				if large++; large%dropEvery == 0 {
					continue
				}
			}
			// A write can fail while the link is down (EIO); keep going.
			if _, err := tap.Write(f); errors.Is(err, os.ErrClosed) {
				return
			}
		}
	}()
	return p
}

// Close stops the pump. The TAP stays open (the namespace owns it).
func (p *Pump) Close() {
	p.once.Do(func() {
		p.conn.Close()
		// Unblock the TAP reader without closing the TAP.
		p.tap.SetReadDeadline(time.Now())
	})
}

// Wait waits for both directions to stop.
func (p *Pump) Wait() { p.wg.Wait() }

// DialQEMU connects to a QEMU-framing stream socket, retrying while the
// socket does not exist yet.
func DialQEMU(path string, timeout time.Duration) (netstack.FrameConn, error) {
	c, err := dialRetry("unix", path, timeout)
	if err != nil {
		return nil, err
	}
	return netstack.NewStreamConn(c), nil
}

// DialBESS connects to a unixpacket socket (one frame per packet).
func DialBESS(path string, timeout time.Duration) (netstack.FrameConn, error) {
	c, err := dialRetry("unixpacket", path, timeout)
	if err != nil {
		return nil, err
	}
	return netstack.NewDatagramConn(c), nil
}

// DialVfkit binds a unixgram socket of its own, connects it to path and
// announces itself the way vfkit does.
func DialVfkit(path string, timeout time.Duration) (netstack.FrameConn, error) {
	local := filepath.Join(os.TempDir(), fmt.Sprintf("capsem-vfkit-%d-%d.sock", os.Getpid(), nsCounter.Add(1)))
	os.Remove(local)
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialUnix("unixgram", &net.UnixAddr{Name: local, Net: "unixgram"}, &net.UnixAddr{Name: path, Net: "unixgram"})
		if err == nil {
			if _, err := c.Write([]byte("VFKT")); err != nil {
				c.Close()
				return nil, err
			}
			return netstack.NewDatagramConn(&removeOnClose{UnixConn: c, path: local}), nil
		}
		os.Remove(local)
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type removeOnClose struct {
	*net.UnixConn
	path string
}

func (r *removeOnClose) Close() error {
	err := r.UnixConn.Close()
	os.Remove(r.path)
	return err
}

func dialRetry(network, path string, timeout time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.Dial(network, path)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("connect to %s %s: %w", network, path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
