package boot

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A minimal rtnetlink client: enough to bring a link up, set its MTU, add an
// IPv4 address and a default route. Every request asks for an
// acknowledgement and returns the kernel's error.

type netlink struct {
	fd  int
	seq uint32
}

func openNetlink() (*netlink, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	return &netlink{fd: fd}, nil
}

func (n *netlink) Close() error { return unix.Close(n.fd) }

// nlAttr appends a route attribute (type, data), padded to 4 bytes.
func nlAttr(b []byte, typ uint16, data []byte) []byte {
	l := unix.SizeofRtAttr + len(data)
	b = binary.NativeEndian.AppendUint16(b, uint16(l))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func structBytes[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

// request sends one message and waits for its acknowledgement.
func (n *netlink) request(typ uint16, flags uint16, body []byte) error {
	n.seq++
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	msg = append(msg, body...)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], flags|unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], n.seq)
	if err := unix.Sendto(n.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 8192)
	for {
		nr, _, err := unix.Recvfrom(n.fd, buf, 0)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return err
		}
		msgs, err := parseNetlinkAcks(buf[:nr], n.seq)
		if err != nil {
			return err
		}
		if msgs {
			return nil
		}
	}
}

// parseNetlinkAcks looks for the acknowledgement of seq in a datagram: true
// when found (with the kernel's error, if any).
func parseNetlinkAcks(b []byte, seq uint32) (bool, error) {
	for len(b) >= unix.SizeofNlMsghdr {
		l := binary.NativeEndian.Uint32(b[0:])
		typ := binary.NativeEndian.Uint16(b[4:])
		s := binary.NativeEndian.Uint32(b[8:])
		if l < unix.SizeofNlMsghdr || int(l) > len(b) {
			return false, fmt.Errorf("netlink: truncated message")
		}
		if typ == unix.NLMSG_ERROR && s == seq {
			if l < unix.SizeofNlMsghdr+4 {
				return false, fmt.Errorf("netlink: short error message")
			}
			if code := int32(binary.NativeEndian.Uint32(b[unix.SizeofNlMsghdr:])); code != 0 {
				return true, unix.Errno(-code)
			}
			return true, nil
		}
		al := (l + 3) &^ 3
		if int(al) > len(b) {
			break
		}
		b = b[al:]
	}
	return false, nil
}

// LinkUp brings link idx up, setting its MTU first if mtu > 0.
func (n *netlink) LinkUp(idx, mtu int) error {
	ifi := unix.IfInfomsg{Family: unix.AF_UNSPEC, Index: int32(idx), Flags: unix.IFF_UP, Change: unix.IFF_UP}
	body := append([]byte(nil), structBytes(&ifi)...)
	if mtu > 0 {
		body = nlAttr(body, unix.IFLA_MTU, u32(uint32(mtu)))
	}
	if err := n.request(unix.RTM_NEWLINK, 0, body); err != nil {
		return fmt.Errorf("link %d up (mtu %d): %w", idx, mtu, err)
	}
	return nil
}

// AddAddr adds an IPv4 address with its prefix to link idx.
func (n *netlink) AddAddr(idx int, p netip.Prefix) error {
	ifa := unix.IfAddrmsg{Family: unix.AF_INET, Prefixlen: uint8(p.Bits()), Scope: unix.RT_SCOPE_UNIVERSE, Index: uint32(idx)}
	a := p.Addr().As4()
	body := append([]byte(nil), structBytes(&ifa)...)
	body = nlAttr(body, unix.IFA_LOCAL, a[:])
	body = nlAttr(body, unix.IFA_ADDRESS, a[:])
	if p.Bits() < 31 {
		bc := broadcast(p).As4()
		body = nlAttr(body, unix.IFA_BROADCAST, bc[:])
	}
	err := n.request(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, body)
	if err != nil {
		return fmt.Errorf("add address %v to link %d: %w", p, idx, err)
	}
	return nil
}

// AddDefaultRoute routes everything through gw on link idx.
func (n *netlink) AddDefaultRoute(idx int, gw netip.Addr) error {
	rt := unix.RtMsg{Family: unix.AF_INET, Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_BOOT,
		Scope: unix.RT_SCOPE_UNIVERSE, Type: unix.RTN_UNICAST}
	g := gw.As4()
	body := append([]byte(nil), structBytes(&rt)...)
	body = nlAttr(body, unix.RTA_GATEWAY, g[:])
	body = nlAttr(body, unix.RTA_OIF, u32(uint32(idx)))
	if err := n.request(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, body); err != nil {
		return fmt.Errorf("default route via %v: %w", gw, err)
	}
	return nil
}

// broadcast is the directed broadcast address of p.
func broadcast(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	v := binary.BigEndian.Uint32(a[:]) | (uint32(1)<<(32-p.Bits()) - 1)
	var out [4]byte
	binary.BigEndian.PutUint32(out[:], v)
	return netip.AddrFrom4(out)
}
