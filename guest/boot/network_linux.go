package boot

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/bootparam"
)

// NetResult is the network as configured.
type NetResult struct {
	Interface string
	Addr      netip.Prefix
	Gateway   netip.Addr
	DNS       []netip.Addr
	MTU       int
	DHCP      bool
}

// PickInterface chooses the guest's NIC: name if given, else eth0 if it
// exists, else the first interface with a MAC that is not loopback.
func PickInterface(name string) (*net.Interface, error) {
	if name != "" {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return nil, fmt.Errorf("interface %s: %w (is virtio_net in the module list?)", name, err)
		}
		return ifi, nil
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var first *net.Interface
	for i := range ifs {
		ifi := &ifs[i]
		if ifi.Flags&net.FlagLoopback != 0 || len(ifi.HardwareAddr) != 6 {
			continue
		}
		if ifi.Name == "eth0" {
			return ifi, nil
		}
		if first == nil {
			first = ifi
		}
	}
	if first == nil {
		return nil, errors.New("no network interface (is virtio_net in the module list?)")
	}
	return first, nil
}

// ConfigureNetwork brings up lo and the guest's NIC with the command
// line's address, gateway and MTU, or with a DHCP lease when the command
// line names no address. dhcpTimeout bounds the DHCP exchange.
func ConfigureNetwork(c bootparam.BootParams, dhcpTimeout time.Duration) (NetResult, error) {
	nl, err := openNetlink()
	if err != nil {
		return NetResult{}, err
	}
	defer nl.Close()
	if lo, err := net.InterfaceByName("lo"); err == nil {
		if err := nl.LinkUp(lo.Index, 0); err != nil {
			return NetResult{}, err
		}
	}
	ifi, err := PickInterface(c.Interface)
	if err != nil {
		return NetResult{}, err
	}
	r := NetResult{Interface: ifi.Name, Addr: c.IP, Gateway: c.Gateway, DNS: c.DNS, MTU: c.MTU}
	if err := nl.LinkUp(ifi.Index, c.MTU); err != nil {
		return r, err
	}
	if !c.IP.IsValid() {
		lease, err := DHCP(ifi, dhcpTimeout)
		if err != nil {
			return r, err
		}
		r.DHCP = true
		r.Addr = lease.Addr
		if !r.Gateway.IsValid() {
			r.Gateway = lease.Gateway
		}
		if len(r.DNS) == 0 {
			r.DNS = lease.DNS
		}
		if r.MTU == 0 && lease.MTU >= 576 {
			r.MTU = lease.MTU
			if err := nl.LinkUp(ifi.Index, r.MTU); err != nil {
				return r, err
			}
		}
	}
	if err := nl.AddAddr(ifi.Index, r.Addr); err != nil {
		return r, err
	}
	if r.Gateway.IsValid() {
		if err := nl.AddDefaultRoute(ifi.Index, r.Gateway); err != nil {
			return r, err
		}
	}
	if r.MTU == 0 {
		if i, err := net.InterfaceByIndex(ifi.Index); err == nil {
			r.MTU = i.MTU
		}
	}
	return r, nil
}

// DHCP obtains a lease on ifi, which must be up. It uses an ordinary UDP
// socket bound to the interface and asks for broadcast replies, which the
// kernel delivers before the interface has an address.
func DHCP(ifi *net.Interface, timeout time.Duration) (Lease, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return Lease{}, fmt.Errorf("dhcp: %w", err)
	}
	defer unix.Close(fd)
	for _, o := range []int{unix.SO_REUSEADDR, unix.SO_BROADCAST} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o, 1); err != nil {
			return Lease{}, fmt.Errorf("dhcp: %w", err)
		}
	}
	if err := unix.BindToDevice(fd, ifi.Name); err != nil {
		return Lease{}, fmt.Errorf("dhcp: bind to %s: %w", ifi.Name, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: 68}); err != nil {
		return Lease{}, fmt.Errorf("dhcp: bind port 68: %w", err)
	}
	var xb [4]byte
	rand.Read(xb[:])
	xid := binary.BigEndian.Uint32(xb[:])
	bcast := &unix.SockaddrInet4{Port: 67, Addr: [4]byte{255, 255, 255, 255}}
	deadline := time.Now().Add(timeout)

	exchange := func(msg []byte, want byte) (byte, Lease, error) {
		wait := 250 * time.Millisecond
		for time.Now().Before(deadline) {
			if err := unix.Sendto(fd, msg, 0, bcast); err != nil {
				return 0, Lease{}, fmt.Errorf("dhcp: send: %w", err)
			}
			until := time.Now().Add(wait)
			if until.After(deadline) {
				until = deadline
			}
			for time.Now().Before(until) {
				tv := unix.NsecToTimeval(int64(time.Until(until)))
				if tv.Sec == 0 && tv.Usec == 0 {
					tv.Usec = 1
				}
				_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
				buf := make([]byte, 1500)
				n, _, err := unix.Recvfrom(fd, buf, 0)
				if err != nil {
					if err == unix.EAGAIN || err == unix.EINTR {
						continue
					}
					return 0, Lease{}, fmt.Errorf("dhcp: receive: %w", err)
				}
				typ, l, err := parseDHCPReply(buf[:n], xid, ifi.HardwareAddr)
				if err != nil {
					continue
				}
				if typ == want || typ == dhcpNak {
					return typ, l, nil
				}
			}
			wait = min(wait*2, 2*time.Second)
		}
		return 0, Lease{}, fmt.Errorf("dhcp on %s: no answer within %v", ifi.Name, timeout)
	}

	for time.Now().Before(deadline) {
		_, offer, err := exchange(dhcpMessage(dhcpDiscover, xid, ifi.HardwareAddr, netip.Addr{}, netip.Addr{}), dhcpOffer)
		if err != nil {
			return Lease{}, err
		}
		if !offer.Addr.IsValid() {
			continue
		}
		typ, ack, err := exchange(dhcpMessage(dhcpRequest, xid, ifi.HardwareAddr, offer.Addr.Addr(), offer.Server), dhcpAck)
		if err != nil {
			return Lease{}, err
		}
		if typ == dhcpAck {
			return ack, nil
		}
		// NAK: start over.
	}
	return Lease{}, fmt.Errorf("dhcp on %s: no lease within %v", ifi.Name, timeout)
}

// WriteResolver writes /etc/resolv.conf and /etc/hosts under root.
func WriteResolver(root, hostname string, dns []netip.Addr) error {
	var rc strings.Builder
	rc.WriteString("# written by capsem-agent: DNS is answered by capsem on the host\n")
	for _, a := range dns {
		fmt.Fprintf(&rc, "nameserver %s\n", a)
	}
	// glibc gives a query 5 s and one retry by default: 10 s, after which
	// getaddrinfo fails. Capsem answers at once, except a query it holds
	// while a person is asked about the name ([network] unknown = "ask",
	// 60 s by default): 30 s a try, two tries, keeps the guest's programs
	// waiting that long. The host's answers cross no real network, so a
	// lost reply, which the long timeout would make slow, does not happen.
	rc.WriteString("options timeout:30 attempts:2\n")
	hosts := fmt.Sprintf("127.0.0.1\tlocalhost\n127.0.1.1\t%s\n", hostname)
	etc := filepath.Join(root, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return err
	}
	for name, data := range map[string]string{"resolv.conf": rc.String(), "hosts": hosts, "hostname": hostname + "\n"} {
		p := filepath.Join(etc, name)
		_ = os.Remove(p) // may be a symlink into a read-only place (systemd-resolved's stub)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}
