package boot

import (
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Config is what the kernel command line tells the agent. Every key is
// optional; the zero value (after defaults) boots with DHCP, stays in the
// initramfs, mounts no workspace and serves on the virtio-serial port
// "capsem.control".
type Config struct {
	// Network. IP invalid means DHCP.
	Interface string            // capsem.if (default: eth0 if present, else the first non-loopback)
	IP        netip.Prefix      // capsem.ip=198.18.0.2/24, or "dhcp"
	Gateway   netip.Addr        // capsem.gw
	DNS       []netip.Addr      // capsem.dns=a[,b]
	MTU       int               // capsem.mtu (0: leave the NIC's)
	Hostname  string            // capsem.hostname (default "capsem")
	NoNetwork bool              // capsem.ip=none
	Root      string            // capsem.root=/dev/vda: the root image (empty: stay in the initramfs)
	RootFS    string            // capsem.rootfs=erofs|squashfs (default: detected from the superblock)
	WSFS      string            // capsem.ws=9p|virtiofs (empty or "none": no workspace)
	WSTag     string            // capsem.ws.tag (default "workspace")
	WSPath    string            // capsem.ws.path (default "/workspace")
	Port      string            // capsem.port: virtio-serial port name (default "capsem.control")
	Vsock     uint32            // capsem.vsock=PORT: listen on vsock instead (Apple vz)
	CA        []byte            // capsem.ca=base64(DER or PEM): a CA certificate, as PEM
	Modules   string            // capsem.modules (default "/lib/modules/capsem.order")
	Lockdown  bool              // capsem.lockdown=0 turns the sysctl lockdown off (debugging only)
	Debug     bool              // capsem.debug=1: log every step to the console
	Unknown   []string          // capsem.* keys this agent does not know (reported as warnings)
	Extra     map[string]string // capsem.* keys kept for later use, by name
}

// Defaults for Config.
const (
	DefaultHostname    = "capsem"
	DefaultPort        = "capsem.control"
	DefaultWSTag       = "workspace"
	DefaultWSPath      = "/workspace"
	DefaultModulesList = "/lib/modules/capsem.order"
)

// SplitCmdline splits a kernel command line into parameters the way the
// kernel does: at spaces outside double quotes, with the quotes removed.
func SplitCmdline(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			have = true
		case !inQuote && (r == ' ' || r == '\t' || r == '\n' || r == '\r'):
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// ParseCmdline reads the capsem.* parameters of a kernel command line
// (/proc/cmdline). Other parameters are ignored. A value that does not
// parse is an error naming the parameter: a half-configured guest is worse
// than one that says why it will not boot.
func ParseCmdline(s string) (Config, error) {
	c := Config{
		Hostname: DefaultHostname,
		Port:     DefaultPort,
		WSTag:    DefaultWSTag,
		WSPath:   DefaultWSPath,
		Modules:  DefaultModulesList,
		Lockdown: true,
	}
	for _, p := range SplitCmdline(s) {
		key, val, _ := strings.Cut(p, "=")
		if !strings.HasPrefix(key, "capsem.") {
			continue
		}
		if err := c.set(key, val); err != nil {
			return Config{}, fmt.Errorf("kernel command line %s: %w", p, err)
		}
	}
	return c, nil
}

func (c *Config) set(key, val string) error {
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
		c.Lockdown = b
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

// DecodeCA turns capsem.ca's value — base64 (standard or URL alphabet,
// padded or not) of a DER certificate or of a PEM file — into PEM. The
// command line is short (2 KiB on x86), so DER in URL-safe base64 is what
// the host should send; a CA of any size can come over the control channel
// instead (Hello.CA).
func DecodeCA(v string) ([]byte, error) {
	v = strings.TrimRight(v, "=")
	var raw []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.RawStdEncoding} {
		if raw, err = enc.DecodeString(v); err == nil {
			break
		}
	}
	if err != nil || len(raw) == 0 {
		return nil, fmt.Errorf("want base64 of a DER or PEM certificate")
	}
	if strings.HasPrefix(string(raw), "-----BEGIN") {
		return CheckPEM(raw)
	}
	if raw[0] != 0x30 { // an ASN.1 SEQUENCE
		return nil, fmt.Errorf("not a DER certificate")
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: raw}), nil
}

// CheckPEM verifies that b holds at least one PEM CERTIFICATE block and
// nothing but certificate blocks, and returns those blocks re-encoded.
func CheckPEM(b []byte) ([]byte, error) {
	var out []byte
	rest := b
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %q is not a CERTIFICATE", blk.Type)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: blk.Bytes})...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no PEM certificate")
	}
	return out, nil
}
