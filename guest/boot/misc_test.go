package boot

import (
	"bytes"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"math/rand"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

type byteReaderAt []byte

func (b byteReaderAt) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(b).ReadAt(p, off)
}

func TestDetectFS(t *testing.T) {
	sq := make([]byte, 4096)
	copy(sq, "hsqs")
	if fs, err := DetectFS(byteReaderAt(sq)); err != nil || fs != "squashfs" {
		t.Fatal(fs, err)
	}
	ero := make([]byte, 4096)
	binary.LittleEndian.PutUint32(ero[1024:], erofsMagic)
	if fs, err := DetectFS(byteReaderAt(ero)); err != nil || fs != "erofs" {
		t.Fatal(fs, err)
	}
	for _, b := range [][]byte{nil, make([]byte, 10), make([]byte, 4096)} {
		if _, err := DetectFS(byteReaderAt(b)); !errors.Is(err, ErrUnknownFS) {
			t.Fatal(err)
		}
	}
	ext := make([]byte, 4096)
	binary.LittleEndian.PutUint16(ext[1024+56:], ext4Magic)
	for _, c := range []struct {
		disk []byte
		want bool
		why  string
	}{
		{ext, true, "s_magic at 1080"},
		{ero, false, "the erofs root image is not a writable disk"},
		{make([]byte, 4096), false, "a blank disk is refused, never formatted by the guest"},
		{make([]byte, 1081), false, "cut inside the magic"},
	} {
		if got := IsExt4(byteReaderAt(c.disk)); got != c.want {
			t.Errorf("IsExt4 = %v, want %v (%s)", got, c.want, c.why)
		}
	}
}

func TestApplySysctls(t *testing.T) {
	proc := t.TempDir()
	mk := func(key string) string {
		p := filepath.Join(proc, strings.ReplaceAll(key, ".", "/"))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("0\n"), 0o644)
		return p
	}
	for _, s := range LockdownSysctls() {
		if !strings.HasPrefix(s.Key, "net.ipv6") && s.Key != "kernel.kexec_load_disabled" {
			mk(s.Key)
		}
	}
	applied, err := ApplySysctls(proc, LockdownSysctls())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"kernel.kptr_restrict=2", "kernel.dmesg_restrict=1", "kernel.modules_disabled=1"}
	if !reflect.DeepEqual(applied, want) {
		t.Fatalf("applied %q", applied)
	}
	b, _ := os.ReadFile(filepath.Join(proc, "kernel/modules_disabled"))
	if string(b) != "1\n" {
		t.Fatalf("modules_disabled = %q", b)
	}
	// modules_disabled comes last: every other setting first.
	l := LockdownSysctls()
	if l[len(l)-1].Key != "kernel.modules_disabled" {
		t.Fatal("modules_disabled must be the last lockdown setting")
	}
	// A required setting that is missing stops the lockdown with an error.
	if _, err := ApplySysctls(t.TempDir(), LockdownSysctls()); err == nil || !strings.Contains(err.Error(), "kptr_restrict") {
		t.Fatalf("missing required sysctl: %v", err)
	}
	// Early settings are all optional.
	if a, err := ApplySysctls(t.TempDir(), EarlySysctls()); err != nil || len(a) != 0 {
		t.Fatal(a, err)
	}
}

func TestParseSwaps(t *testing.T) {
	if s := ParseSwaps([]byte("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n")); len(s) != 0 {
		t.Fatal(s)
	}
	s := ParseSwaps([]byte("Filename Type Size Used Priority\n/dev/vdb partition 1024 0 -2\n/swap\\040file file 10 0 -3\n"))
	if !reflect.DeepEqual(s, []string{"/dev/vdb", "/swap file"}) {
		t.Fatal(s)
	}
}

func testPEM(b byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{0x30, 3, b, b, b}})
}

func TestInstallCA(t *testing.T) {
	root := t.TempDir()
	public := testPEM(1)
	bundle := filepath.Join(root, CABundle)
	os.MkdirAll(filepath.Dir(bundle), 0o755)
	os.WriteFile(bundle, bytes.TrimSuffix(public, []byte("\n")), 0o644) // no final newline
	certifi := filepath.Join(root, "usr/local/lib/python3.11/site-packages/certifi/cacert.pem")
	os.MkdirAll(filepath.Dir(certifi), 0o755)
	os.WriteFile(certifi, public, 0o644)
	// Debian's certifi is a symlink to the system bundle.
	deb := filepath.Join(root, "usr/lib/python3/dist-packages/certifi/cacert.pem")
	os.MkdirAll(filepath.Dir(deb), 0o755)
	os.Symlink(bundle, deb)

	ca := testPEM(9)
	files, err := InstallCA(root, ca)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{CAFile, CABundle, "/usr/local/lib/python3.11/site-packages/certifi/cacert.pem"}
	if !reflect.DeepEqual(files, want) {
		t.Fatalf("files %q", files)
	}
	b, _ := os.ReadFile(bundle)
	if !bytes.HasPrefix(b, bytes.TrimSpace(public)) || !bytes.HasSuffix(b, ca) || bytes.Count(b, []byte("BEGIN")) != 2 {
		t.Fatalf("bundle:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, CAFile)); !bytes.Equal(b, ca) {
		t.Fatalf("CA file %q", b)
	}
	// Twice: nothing changes.
	files, err = InstallCA(root, ca)
	if err != nil || len(files) != 1 {
		t.Fatalf("second install wrote %q, %v", files, err)
	}
	if b2, _ := os.ReadFile(bundle); !bytes.Equal(b, b2) {
		t.Fatal("bundle changed on the second install")
	}
	// A root without any bundle gets one.
	root2 := t.TempDir()
	if files, err := InstallCA(root2, ca); err != nil || len(files) != 2 {
		t.Fatal(files, err)
	}
	if _, err := InstallCA(root2, []byte("junk")); err == nil {
		t.Fatal("junk installed")
	}
	env := strings.Join(CAEnv(), " ")
	for _, k := range []string{"SSL_CERT_FILE=", "REQUESTS_CA_BUNDLE=", "NODE_EXTRA_CA_CERTS=", "CURL_CA_BUNDLE="} {
		if !strings.Contains(env, k) {
			t.Errorf("CAEnv lacks %s", k)
		}
	}
}

func TestFindPort(t *testing.T) {
	sys, dev := t.TempDir(), t.TempDir()
	for port, name := range map[string]string{"vport0p0": "", "vport0p1": "org.qemu.guest_agent.0", "vport0p2": "capsem.control"} {
		os.MkdirAll(filepath.Join(sys, "class/virtio-ports", port), 0o755)
		os.WriteFile(filepath.Join(sys, "class/virtio-ports", port, "name"), []byte(name+"\n"), 0o444)
	}
	if _, err := FindPort(sys, dev, "capsem.control"); err == nil || !strings.Contains(err.Error(), "does not exist yet") {
		t.Fatalf("before the device node: %v", err)
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		os.WriteFile(filepath.Join(dev, "vport0p2"), nil, 0o600)
	}()
	p, err := WaitPort(sys, dev, "capsem.control", 5*time.Second)
	if err != nil || p != filepath.Join(dev, "vport0p2") {
		t.Fatal(p, err)
	}
	if _, err := FindPort(sys, dev, "nope"); err == nil || !strings.Contains(err.Error(), "virtserialport") {
		t.Fatal(err)
	}
}

// reply builds a server's BOOTREPLY like capsem's netstack does.
func reply(xid uint32, mac net.HardwareAddr, typ byte) []byte {
	b := make([]byte, 240)
	b[0], b[1], b[2] = 2, 1, 6
	binary.BigEndian.PutUint32(b[4:], xid)
	copy(b[16:], []byte{198, 18, 0, 2})
	copy(b[28:], mac)
	binary.BigEndian.PutUint32(b[236:], dhcpMagic)
	b = append(b, 53, 1, typ, 54, 4, 198, 18, 0, 1, 51, 4, 0, 1, 0x51, 0x80, 1, 4, 255, 255, 255, 0,
		3, 4, 198, 18, 0, 1, 6, 8, 198, 18, 0, 1, 198, 18, 0, 9, 26, 2, 0x05, 0xdc, 0, 255)
	return b
}

func TestDHCPMessages(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 7}
	m := dhcpMessage(dhcpRequest, 0xabcd, mac, netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.18.0.1"))
	if len(m) != 300 || m[0] != 1 || binary.BigEndian.Uint32(m[4:]) != 0xabcd || binary.BigEndian.Uint16(m[10:]) != 0x8000 ||
		!bytes.Equal(m[28:34], mac) || !bytes.Contains(m[240:], []byte{53, 1, 3, 50, 4, 198, 18, 0, 2, 54, 4, 198, 18, 0, 1}) {
		t.Fatalf("request % x", m)
	}
	typ, l, err := parseDHCPReply(reply(0xabcd, mac, dhcpAck), 0xabcd, mac)
	if err != nil || typ != dhcpAck {
		t.Fatal(typ, err)
	}
	want := Lease{Addr: netip.MustParsePrefix("198.18.0.2/24"), Gateway: netip.MustParseAddr("198.18.0.1"),
		DNS: []netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.9")}, MTU: 1500,
		Server: netip.MustParseAddr("198.18.0.1"), Time: 86400 * time.Second}
	if !reflect.DeepEqual(l, want) {
		t.Fatalf("lease %+v", l)
	}
	if _, _, err := parseDHCPReply(reply(1, mac, dhcpAck), 0xabcd, mac); !errors.Is(err, errNotForUs) {
		t.Fatal("another transaction accepted")
	}
	if _, _, err := parseDHCPReply(reply(0xabcd, net.HardwareAddr{9, 9, 9, 9, 9, 9}, dhcpAck), 0xabcd, mac); !errors.Is(err, errNotForUs) {
		t.Fatal("another client's reply accepted")
	}
	// Garbage never panics.
	r := rand.New(rand.NewSource(1))
	good := reply(0xabcd, mac, dhcpOffer)
	for i := 0; i < 20000; i++ {
		b := append([]byte(nil), good[:r.Intn(len(good)+1)]...)
		for j := 0; j < 3 && len(b) > 0; j++ {
			b[r.Intn(len(b))] = byte(r.Intn(256))
		}
		parseDHCPReply(b, 0xabcd, mac)
	}
}

func TestRemoveDangerousDevices(t *testing.T) {
	dev := t.TempDir()
	for _, n := range []string{"mem", "port", "null"} {
		if err := os.WriteFile(filepath.Join(dev, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := RemoveDangerousDevices(dev)
	if err != nil || len(removed) != 2 {
		t.Fatalf("removed %v, %v; want mem and port (kmem absent is fine)", removed, err)
	}
	for n, want := range map[string]bool{"mem": false, "port": false, "kmem": false, "null": true} {
		if _, err := os.Stat(filepath.Join(dev, n)); (err == nil) != want {
			t.Errorf("%s present = %v, want %v", n, err == nil, want)
		}
	}
}
