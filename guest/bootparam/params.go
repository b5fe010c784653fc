package bootparam

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// BootParams is what the host tells the guest's PID 1 on the kernel command
// line. Every key is optional. The zero value means every default: DHCP, no
// root image (stay in the initramfs), no workspace, the control channel on
// the virtio-serial port ControlPort, the sysctl lockdown on; String writes
// only what differs from it, and Parse fills the defaults in.
type BootParams struct {
	// Network. IP invalid means DHCP.
	Interface string       // capsem.if (default: eth0 if present, else the first non-loopback)
	IP        netip.Prefix // capsem.ip=198.18.0.2/24, or "dhcp"
	Gateway   netip.Addr   // capsem.gw
	DNS       []netip.Addr // capsem.dns=a[,b]
	MTU       int          // capsem.mtu (0: leave the NIC's)
	Hostname  string       // capsem.hostname ("": DefaultHostname)
	NoNetwork bool         // capsem.ip=none
	Root      string       // capsem.root=/dev/vda: the root image (empty: stay in the initramfs)
	RootFS    string       // capsem.rootfs=erofs|squashfs (default: detected from the superblock)
	RW        string       // capsem.rw=/dev/vdb: an ext4 disk holding the root's writable layer (empty: a tmpfs)
	WSFS      string       // capsem.ws=9p|virtiofs (empty or "none": no workspace)
	WSTag     string       // capsem.ws.tag ("": WorkspaceTag)
	WSPath    string       // capsem.ws.path ("": WorkspacePath)
	WSDefer   bool         // capsem.wsdefer=1: the workspace is mounted by the agent's first Thaw, not at boot
	Port      string       // capsem.port: virtio-serial port name ("": ControlPort)
	Vsock     uint32       // capsem.vsock=PORT: listen on vsock instead (Apple vz)
	CA        []byte       // capsem.ca=base64(DER or PEM): a CA certificate, as PEM
	Modules   string       // capsem.modules ("": ModuleOrder)
	// NoLockdown (capsem.lockdown=0) leaves the sysctl lockdown off, for
	// debugging only. It is a negative so that the zero value locks down.
	NoLockdown bool
	Debug      bool              // capsem.debug=1: log every step to the console
	Unknown    []string          // capsem.* keys this agent does not know (reported as warnings)
	Extra      map[string]string // the values of the Unknown keys, by name
}

// The names host and guest must agree on, and the defaults Parse fills in.
const (
	// ControlPort is the name of the virtio-serial port the control
	// channel (guest/proto) runs on under QEMU.
	ControlPort = "capsem.control"
	// WorkspaceTag is the mount tag the host shares the workspace under
	// (9p under QEMU, virtio-fs under vz) and the guest mounts.
	WorkspaceTag = "workspace"
	// WorkspacePath is where the guest mounts it.
	WorkspacePath   = "/workspace"
	DefaultHostname = "capsem"
	// RWModuleOrder lists, like ModuleOrder, the modules a writable disk
	// needs (ext4 and what it depends on beyond ModuleOrder's): loaded only
	// when capsem.rw is set, so that a guest without one does not pay for
	// them at boot (~150 ms under TCG).
	RWModuleOrder = "/lib/modules/capsem-rw.order"
	// ModuleOrder is the initramfs file listing the kernel modules to load,
	// in order (guest/image writes it).
	ModuleOrder = "/lib/modules/capsem.order"
)

// Parse reads the capsem.* parameters of a kernel command line
// (/proc/cmdline), the last occurrence of a key winning, and fills in the
// defaults. Other parameters are ignored. A value that does not parse is an
// error naming the parameter: a half-configured guest is worse than one
// that says why it does not boot.
func Parse(s string) (BootParams, error) {
	c := BootParams{
		Hostname: DefaultHostname,
		Port:     ControlPort,
		WSTag:    WorkspaceTag,
		WSPath:   WorkspacePath,
		Modules:  ModuleOrder,
	}
	for _, p := range SplitCmdline(s) {
		key, val, _ := strings.Cut(p, "=")
		if !strings.HasPrefix(key, "capsem.") {
			continue
		}
		if err := c.set(key, val); err != nil {
			return BootParams{}, fmt.Errorf("kernel command line %s: %w", p, err)
		}
	}
	return c, nil
}

func (c *BootParams) set(key, val string) error {
	switch key {
	case "capsem.if":
		if val == "" || len(val) > 15 || strings.ContainsAny(val, "/ ") {
			return fmt.Errorf("not an interface name")
		}
		c.Interface = val
	case "capsem.ip":
		switch val {
		case "dhcp", "":
			c.IP = netip.Prefix{}
		case "none", "off":
			c.NoNetwork = true
		default:
			p, err := netip.ParsePrefix(val)
			if err != nil || !p.Addr().Is4() || p.Bits() == 0 {
				return fmt.Errorf("want an IPv4 address with its prefix length (198.18.0.2/24), dhcp or none")
			}
			c.IP = p
		}
	case "capsem.gw":
		a, err := netip.ParseAddr(val)
		if err != nil || !a.Is4() {
			return fmt.Errorf("want an IPv4 address")
		}
		c.Gateway = a
	case "capsem.dns":
		c.DNS = nil
		for _, f := range strings.Split(val, ",") {
			a, err := netip.ParseAddr(strings.TrimSpace(f))
			if err != nil || !a.Is4() {
				return fmt.Errorf("want IPv4 addresses separated by commas")
			}
			c.DNS = append(c.DNS, a)
		}
	case "capsem.mtu":
		n, err := strconv.Atoi(val)
		if err != nil || n < 576 || n > 65535 {
			return fmt.Errorf("want a number from 576 to 65535")
		}
		c.MTU = n
	case "capsem.hostname":
		if val == "" || len(val) > 64 || strings.ContainsAny(val, "/ \x00") {
			return fmt.Errorf("not a host name")
		}
		c.Hostname = val
	case "capsem.root":
		if !strings.HasPrefix(val, "/dev/") {
			return fmt.Errorf("want a device path under /dev")
		}
		c.Root = val
	case "capsem.rw":
		if !strings.HasPrefix(val, "/dev/") {
			return fmt.Errorf("want a device path under /dev")
		}
		c.RW = val
	case "capsem.rootfs":
		switch val {
		case "erofs", "squashfs":
			c.RootFS = val
		case "auto", "":
			c.RootFS = ""
		default:
			return fmt.Errorf("want erofs, squashfs or auto")
		}
	case "capsem.ws":
		switch val {
		case "9p", "virtiofs":
			c.WSFS = val
		case "none", "":
			c.WSFS = ""
		default:
			return fmt.Errorf("want 9p, virtiofs or none")
		}
	case "capsem.ws.tag":
		if val == "" || len(val) > 36 {
			return fmt.Errorf("want a mount tag of 1 to 36 bytes")
		}
		c.WSTag = val
	case "capsem.ws.path":
		if !strings.HasPrefix(val, "/") || val == "/" || strings.Contains(val, "..") {
			return fmt.Errorf("want an absolute path other than /")
		}
		c.WSPath = val
	case "capsem.wsdefer":
		// A boot snapshot is taken before any workspace is mounted: QEMU
		// refuses to migrate while a 9p export is mounted in the guest.
		b, err := parseBool(val)
		if err != nil {
			return err
		}
		c.WSDefer = b
	case "capsem.port":
		if val == "" {
			return fmt.Errorf("want a virtio-serial port name")
		}
		c.Port = val
	case "capsem.vsock":
		n, err := strconv.ParseUint(val, 10, 32)
		if err != nil || n == 0 || n == 0xffffffff {
			return fmt.Errorf("want a vsock port number")
		}
		c.Vsock = uint32(n)
	case "capsem.ca":
		pemBytes, err := DecodeCA(val)
		if err != nil {
			return err
		}
		c.CA = pemBytes
	case "capsem.modules":
		if !strings.HasPrefix(val, "/") {
			return fmt.Errorf("want an absolute path")
		}
		c.Modules = val
	case "capsem.lockdown":
		b, err := parseBool(val)
		if err != nil {
			return err
		}
		c.NoLockdown = !b
	case "capsem.debug":
		b, err := parseBool(val)
		if err != nil {
			return err
		}
		c.Debug = b
	default:
		c.Unknown = append(c.Unknown, key)
		if c.Extra == nil {
			c.Extra = map[string]string{}
		}
		c.Extra[key] = val
	}
	return nil
}

func parseBool(v string) (bool, error) {
	switch v {
	case "1", "on", "yes", "true", "":
		return true, nil
	case "0", "off", "no", "false":
		return false, nil
	}
	return false, fmt.Errorf("want 1 or 0")
}

// String is the command line's capsem.* words for p, one per parameter that
// differs from its default; a value with white space is quoted. The order
// is fixed (the root device, the network, the workspace, the CA, debug,
// vsock), so that the command line a guest gets is the same for the same
// parameters. It is what the host appends to the kernel command line, and
// Parse(p.String()) gives p back with the defaults filled in.
func (p BootParams) String() string {
	var w []string
	add := func(key, val string) {
		if strings.ContainsAny(val, " \t\n\r") {
			val = `"` + val + `"`
		}
		w = append(w, key+"="+val)
	}
	if p.Root != "" {
		add("capsem.root", p.Root)
	}
	if p.RootFS != "" {
		add("capsem.rootfs", p.RootFS)
	}
	if p.RW != "" {
		add("capsem.rw", p.RW)
	}
	switch {
	case p.NoNetwork:
		add("capsem.ip", "none")
	case p.IP.IsValid():
		add("capsem.ip", p.IP.String())
	}
	if p.Gateway.IsValid() {
		add("capsem.gw", p.Gateway.String())
	}
	if len(p.DNS) > 0 {
		dns := make([]string, len(p.DNS))
		for i, a := range p.DNS {
			dns[i] = a.String()
		}
		add("capsem.dns", strings.Join(dns, ","))
	}
	if p.MTU != 0 {
		add("capsem.mtu", strconv.Itoa(p.MTU))
	}
	if p.Interface != "" {
		add("capsem.if", p.Interface)
	}
	if p.Hostname != "" && p.Hostname != DefaultHostname {
		add("capsem.hostname", p.Hostname)
	}
	if p.WSFS != "" {
		add("capsem.ws", p.WSFS)
	}
	if p.WSTag != "" && p.WSTag != WorkspaceTag {
		add("capsem.ws.tag", p.WSTag)
	}
	if p.WSPath != "" && p.WSPath != WorkspacePath {
		add("capsem.ws.path", p.WSPath)
	}
	if p.WSDefer {
		add("capsem.wsdefer", "1")
	}
	if p.Port != "" && p.Port != ControlPort {
		add("capsem.port", p.Port)
	}
	if len(p.CA) > 0 {
		add("capsem.ca", EncodeCA(p.CA))
	}
	if p.Modules != "" && p.Modules != ModuleOrder {
		add("capsem.modules", p.Modules)
	}
	if p.NoLockdown {
		add("capsem.lockdown", "0")
	}
	if p.Debug {
		add("capsem.debug", "1")
	}
	if p.Vsock != 0 {
		add("capsem.vsock", strconv.FormatUint(uint64(p.Vsock), 10))
	}
	keys := make([]string, 0, len(p.Extra))
	for k := range p.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		add(k, p.Extra[k])
	}
	return strings.Join(w, " ")
}
