package bootparam

import (
	"encoding/base64"
	"encoding/pem"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	der := []byte{0x30, 0x82, 0x01, 0x00, 1, 2, 3}
	line := "console=ttyS0 panic=-1 quiet capsem.ip=198.18.0.2/24 capsem.gw=198.18.0.1 capsem.dns=198.18.0.1,198.18.0.3 " +
		"capsem.mtu=9000 capsem.if=eth1 capsem.root=/dev/vda capsem.rootfs=erofs capsem.ws=9p capsem.ws.tag=ws " +
		"capsem.ws.path=/src capsem.wsdefer=1 capsem.port=ctl capsem.ca=" + base64.RawURLEncoding.EncodeToString(der) +
		" capsem.hostname=box capsem.lockdown=0 capsem.debug capsem.future=x -- capsem.vsock=1024"
	c, err := Parse(line)
	if err != nil {
		t.Fatal(err)
	}
	if c.IP != netip.MustParsePrefix("198.18.0.2/24") || c.Gateway != netip.MustParseAddr("198.18.0.1") ||
		len(c.DNS) != 2 || c.DNS[1] != netip.MustParseAddr("198.18.0.3") || c.MTU != 9000 || c.Interface != "eth1" {
		t.Fatalf("network %+v", c)
	}
	if c.Root != "/dev/vda" || c.RootFS != "erofs" || c.WSFS != "9p" || c.WSTag != "ws" || c.WSPath != "/src" || !c.WSDefer ||
		c.Port != "ctl" || c.Vsock != 1024 || c.Hostname != "box" || !c.NoLockdown || !c.Debug {
		t.Fatalf("config %+v", c)
	}
	blk, _ := pem.Decode(c.CA)
	if blk == nil || blk.Type != "CERTIFICATE" || string(blk.Bytes) != string(der) {
		t.Fatalf("CA %q", c.CA)
	}
	if strings.Join(c.Unknown, ",") != "capsem.future" || c.Extra["capsem.future"] != "x" {
		t.Fatalf("unknown %q %v", c.Unknown, c.Extra)
	}
}

func TestParseDefaults(t *testing.T) {
	c, err := Parse("console=ttyS0 root=/dev/sda ip=dhcp")
	if err != nil {
		t.Fatal(err)
	}
	if c.IP.IsValid() || c.NoNetwork || c.Root != "" || c.WSFS != "" || c.Port != ControlPort || c.WSTag != WorkspaceTag ||
		c.WSPath != WorkspacePath || c.Modules != ModuleOrder || c.WSDefer || c.NoLockdown || c.Debug || c.Hostname != DefaultHostname {
		t.Fatalf("defaults %+v", c)
	}
	if c, _ := Parse("capsem.ip=none"); !c.NoNetwork {
		t.Fatal("ip=none")
	}
	if c, _ := Parse("capsem.ip=198.18.0.2/24 capsem.ip=dhcp"); c.IP.IsValid() {
		t.Fatal("the last value wins")
	}
}

func TestParseErrors(t *testing.T) {
	for _, p := range []string{
		"capsem.ip=198.18.0.2", "capsem.ip=::1/64", "capsem.ip=bogus", "capsem.ip=1.2.3.4/0",
		"capsem.gw=x", "capsem.gw=fe80::1", "capsem.dns=1.1.1.1,", "capsem.mtu=100", "capsem.mtu=70000", "capsem.mtu=x",
		"capsem.if=", "capsem.if=a/b", "capsem.if=waytoolonginterfacename",
		"capsem.root=vda", "capsem.rw=vdb", "capsem.rootfs=ext4", "capsem.ws=nfs", "capsem.ws.tag=", "capsem.ws.path=relative",
		"capsem.ws.path=/", "capsem.ws.path=/a/../etc", "capsem.port=", "capsem.vsock=0", "capsem.vsock=x",
		"capsem.vsock=4294967295", "capsem.ca=!!!", "capsem.ca=" + base64.StdEncoding.EncodeToString([]byte("not der")),
		"capsem.modules=rel/path", "capsem.lockdown=maybe", "capsem.wsdefer=later", "capsem.hostname=",
	} {
		if _, err := Parse("quiet " + p); err == nil {
			t.Errorf("%s accepted", p)
		} else if !strings.Contains(err.Error(), strings.SplitN(p, "=", 2)[0]) {
			t.Errorf("%s: error does not name the parameter: %v", p, err)
		}
	}
}

func TestString(t *testing.T) {
	der := []byte{0x30, 0x82, 0x01, 0x00, 1, 2, 3}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	for _, c := range []struct {
		p    BootParams
		want string
		why  string
	}{
		{BootParams{}, "", "the zero value is every default: nothing to write"},
		{BootParams{Hostname: DefaultHostname, Port: ControlPort, WSTag: WorkspaceTag, WSPath: WorkspacePath, Modules: ModuleOrder},
			"", "defaults spelled out are not written either"},
		{BootParams{
			IP: netip.MustParsePrefix("198.18.0.2/24"), Gateway: netip.MustParseAddr("198.18.0.1"),
			DNS: []netip.Addr{netip.MustParseAddr("198.18.0.1")}, MTU: 65520,
			CA: caPEM, Debug: true,
		}, "capsem.ip=198.18.0.2/24 capsem.gw=198.18.0.1 capsem.dns=198.18.0.1 capsem.mtu=65520 capsem.ca=" +
			base64.RawURLEncoding.EncodeToString(der) + " capsem.debug=1",
			"what capsem run sends: the CA as unpadded URL-safe base64 of its DER, the shortest the line allows"},
		{BootParams{NoNetwork: true, Root: "/dev/vda", WSFS: "virtiofs", Vsock: 1024},
			"capsem.root=/dev/vda capsem.ip=none capsem.ws=virtiofs capsem.vsock=1024", "what a backend adds"},
		{BootParams{
			Vsock: 1024, Debug: true, CA: caPEM, WSFS: "virtiofs", MTU: 1500, Root: "/dev/vda",
			DNS: []netip.Addr{netip.MustParseAddr("198.18.0.1")}, Gateway: netip.MustParseAddr("198.18.0.1"), IP: netip.MustParsePrefix("198.18.0.2/24"),
		}, "capsem.root=/dev/vda capsem.ip=198.18.0.2/24 capsem.gw=198.18.0.1 capsem.dns=198.18.0.1 capsem.mtu=1500 capsem.ws=virtiofs capsem.ca=" +
			base64.RawURLEncoding.EncodeToString(der) + " capsem.debug=1 capsem.vsock=1024",
			"the order capsem run and the backends wrote the words in by hand, whatever order the fields are set in"},
		{BootParams{NoLockdown: true}, "capsem.lockdown=0", "the lockdown is off only when asked"},
		{BootParams{Root: "/dev/vda", RW: "/dev/vdb", WSFS: "9p"}, "capsem.root=/dev/vda capsem.rw=/dev/vdb capsem.ws=9p",
			"a long-lived sandbox's writable disk follows the root it is layered on"},
		{BootParams{WSFS: "9p", WSDefer: true}, "capsem.ws=9p capsem.wsdefer=1",
			"a boot snapshot's guest: the workspace device is there, mounted only at the first Thaw"},
		{BootParams{WSPath: "/my work"}, `capsem.ws.path="/my work"`, "a value with a space is quoted, as the kernel splits"},
	} {
		got := c.p.String()
		if got != c.want {
			t.Errorf("String:\n got %s\nwant %s\n(%s)", got, c.want, c.why)
			continue
		}
		back, err := Parse(got)
		if err != nil {
			t.Errorf("Parse(%q): %v (%s)", got, err, c.why)
			continue
		}
		if back.String() != got {
			t.Errorf("Parse(String()) changed %q to %q (%s)", got, back.String(), c.why)
		}
	}
}

// FuzzParse: Parse never panics, and what it accepts String writes back to
// the same parameters (the host's words are what the guest reads).
func FuzzParse(f *testing.F) {
	f.Add("console=ttyS0 capsem.ip=198.18.0.2/24 capsem.gw=198.18.0.1 capsem.dns=198.18.0.1 capsem.mtu=4000 capsem.ws=9p")
	f.Add(`capsem.ip=none capsem.root=/dev/vda capsem.rw=/dev/vdb capsem.vsock=7 capsem.ws.path="/a b" capsem.wsdefer capsem.lockdown=0 capsem.x=y capsem.x=z`)
	f.Add("capsem.ca=MIIB capsem.debug capsem.hostname=h capsem.if=eth1 capsem.modules=/m")
	f.Fuzz(func(t *testing.T, line string) {
		p, err := Parse(line)
		if err != nil {
			return
		}
		s := p.String()
		if strings.Contains(s, `""`) || strings.Count(s, `"`)%2 != 0 {
			return // a value with a quote in it has no spelling the kernel splits back
		}
		for k, v := range p.Extra {
			if strings.ContainsAny(v, "\"") || strings.ContainsAny(k, "\" \t\n\r=") {
				return // an unknown key or value no command line spells back
			}
		}
		q, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q) accepted, its String %q refused: %v", line, s, err)
		}
		p.Unknown, q.Unknown = nil, nil // the keys' order follows the line
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("round trip of %q:\n %+v\n %+v", line, p, q)
		}
	})
}
