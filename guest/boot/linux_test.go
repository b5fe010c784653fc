//go:build linux

package boot

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/bootparam"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount and network namespaces)")
	}
}

// inNewNS moves the calling (test) goroutine's thread into new namespaces.
// The thread stays locked, and Go discards it when the test's goroutine
// ends, so no other test ever runs in these namespaces.
func inNewNS(t *testing.T, flags int) {
	t.Helper()
	runtime.LockOSThread()
	if err := unix.Unshare(flags); err != nil {
		t.Skipf("unshare: %v", err)
	}
	if flags&unix.CLONE_NEWNS != 0 {
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			t.Fatalf("make mounts private: %v", err)
		}
	}
}

func TestPlans(t *testing.T) {
	early := EarlyMounts()
	if early[0].Target != "/dev" || early[1].FSType != "proc" || early[1].Flags&unix.MS_NOEXEC == 0 || early[3].Target != "/run" {
		t.Fatalf("early %v", early)
	}
	sys := SystemMounts()
	if sys[0].FSType != "devpts" || !strings.Contains(sys[0].Data, "ptmxmode=0666") || sys[2].Target != "/tmp" {
		t.Fatalf("system %v", sys)
	}
	r := RootMounts("/dev/vda", "erofs", "", DefaultRootLayout, "1g")
	if r[0].Flags&unix.MS_RDONLY == 0 || r[0].FSType != "erofs" || r[1].Data != "mode=0755,size=1g" ||
		r[2].Data != "lowerdir=/run/capsem/lower,upperdir=/run/capsem/rw/upper,workdir=/run/capsem/rw/work" || r[2].Target != "/newroot" {
		t.Fatalf("root %v", r)
	}
	r = RootMounts("/dev/vda", "erofs", "/dev/vdb", DefaultRootLayout, "1g")
	if r[1].Source != "/dev/vdb" || r[1].FSType != "ext4" || r[1].Target != "/run/capsem/rw" || r[1].Data != RWDiskOptions {
		t.Fatalf("root on a writable disk %v", r)
	}
	c, _ := bootparam.Parse("capsem.ws=9p")
	m, ok := WorkspaceMount(c)
	if !ok || m.Source != "workspace" || m.Target != "/workspace" || m.FSType != "9p" || !strings.Contains(m.Data, "trans=virtio") {
		t.Fatalf("9p %v", m)
	}
	c, _ = bootparam.Parse("capsem.ws=virtiofs capsem.ws.tag=t capsem.ws.path=/w")
	if m, ok := WorkspaceMount(c); !ok || m.FSType != "virtiofs" || m.Source != "t" || m.Target != "/w" {
		t.Fatalf("virtiofs %v", m)
	}
	if _, ok := WorkspaceMount(bootparam.BootParams{}); ok {
		t.Fatal("a workspace without capsem.ws")
	}
}

func TestMountRootErofs(t *testing.T) {
	needRoot(t)
	mkfs, err := exec.LookPath("mkfs.erofs")
	if err != nil {
		t.Skip("mkfs.erofs not installed (erofs-utils)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(filepath.Join(src, "etc"), 0o755)
	os.WriteFile(filepath.Join(src, "etc/os-release"), []byte("ID=capsem-test\n"), 0o644)
	img := filepath.Join(dir, "root.erofs")
	if out, err := exec.Command(mkfs, img, src).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.erofs: %v\n%s", err, out)
	}
	{
		inNewNS(t, unix.CLONE_NEWNS)
		l := RootLayout{Lower: filepath.Join(dir, "run/lower"), RW: filepath.Join(dir, "run/rw"), Target: filepath.Join(dir, "newroot")}
		desc, err := MountRoot(img, "", "", l, "16m")
		if errors.Is(err, unix.ENOTBLK) || err != nil && strings.Contains(err.Error(), "block device") {
			t.Skipf("this kernel cannot mount erofs from a file: %v", err)
		}
		if err != nil {
			t.Errorf("MountRoot: %v", err)
			return
		}
		if !strings.HasPrefix(desc, "erofs ") {
			t.Errorf("desc %q", desc)
		}
		b, err := os.ReadFile(filepath.Join(l.Target, "etc/os-release"))
		if err != nil || string(b) != "ID=capsem-test\n" {
			t.Errorf("through the overlay: %q %v", b, err)
		}
		// Writable through the overlay, into the tmpfs; the image is untouched.
		if err := os.WriteFile(filepath.Join(l.Target, "etc/os-release"), []byte("changed\n"), 0o644); err != nil {
			t.Errorf("write through the overlay: %v", err)
		}
		if b, _ := os.ReadFile(filepath.Join(l.Lower, "etc/os-release")); string(b) != "ID=capsem-test\n" {
			t.Errorf("lower changed: %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(l.RW, "upper/etc/os-release")); string(b) != "changed\n" {
			t.Errorf("upper: %q", b)
		}
		if err := os.WriteFile(filepath.Join(l.Lower, "x"), nil, 0o644); err == nil {
			t.Error("the image is writable")
		}
		for _, m := range []string{l.Target, l.RW, l.Lower} {
			unix.Unmount(m, unix.MNT_DETACH)
		}
	}
}

func TestRemoveSameDevice(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	{
		inNewNS(t, unix.CLONE_NEWNS)
		root := filepath.Join(dir, "initramfs")
		os.MkdirAll(root, 0o755)
		if err := unix.Mount("tmpfs", root, "tmpfs", 0, ""); err != nil {
			t.Errorf("mount: %v", err)
			return
		}
		defer unix.Unmount(root, unix.MNT_DETACH)
		for _, d := range []string{"bin", "lib/modules", "mnt/other", "newroot/keep"} {
			os.MkdirAll(filepath.Join(root, d), 0o755)
		}
		os.WriteFile(filepath.Join(root, "init"), []byte("x"), 0o755)
		os.WriteFile(filepath.Join(root, "lib/modules/a.ko"), []byte("x"), 0o644)
		os.Symlink("/etc/passwd", filepath.Join(root, "bin/link"))
		other := filepath.Join(root, "mnt/other")
		unix.Mount("tmpfs", other, "tmpfs", 0, "")
		defer unix.Unmount(other, unix.MNT_DETACH)
		os.WriteFile(filepath.Join(other, "precious"), []byte("x"), 0o644)
		os.WriteFile(filepath.Join(root, "newroot/keep/file"), []byte("x"), 0o644)

		var st unix.Stat_t
		unix.Lstat(root, &st)
		RemoveSameDevice(root, st.Dev, filepath.Join(root, "newroot"))
		for _, gone := range []string{"init", "lib", "bin"} {
			if _, err := os.Lstat(filepath.Join(root, gone)); err == nil {
				t.Errorf("%s survived", gone)
			}
		}
		for _, kept := range []string{"mnt/other/precious", "newroot/keep/file"} {
			if _, err := os.Stat(filepath.Join(root, kept)); err != nil {
				t.Errorf("%s removed: %v", kept, err)
			}
		}
		if _, err := os.Stat("/etc/passwd"); err != nil {
			t.Error("followed a symlink out")
		}
	}
}

// routeVia reports the default route's gateway in this thread's netns.
func defaultGateway(t *testing.T) string {
	b, err := os.ReadFile("/proc/thread-self/net/route")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 2 && f[1] == "00000000" {
			var g [4]byte
			v, _ := parseHex32(f[2])
			binary.LittleEndian.PutUint32(g[:], v)
			return f[0] + " " + netip.AddrFrom4(g).String()
		}
	}
	return ""
}

func parseHex32(s string) (uint32, error) {
	var v uint32
	for _, c := range s {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= uint32(c - '0')
		case c >= 'A' && c <= 'F':
			v |= uint32(c - 'A' + 10)
		case c >= 'a' && c <= 'f':
			v |= uint32(c - 'a' + 10)
		}
	}
	return v, nil
}

func ipTool(t *testing.T) string {
	p, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("needs the ip tool (iproute2) to create a veth pair")
	}
	return p
}

func TestConfigureNetworkStatic(t *testing.T) {
	needRoot(t)
	ip := ipTool(t)
	{
		inNewNS(t, unix.CLONE_NEWNET)
		if out, err := exec.Command(ip, "link", "add", "eth0", "type", "veth", "peer", "name", "host0").CombinedOutput(); err != nil {
			t.Skipf("veth: %v %s", err, out)
		}
		c, err := bootparam.Parse("capsem.ip=198.18.0.2/24 capsem.gw=198.18.0.1 capsem.dns=198.18.0.1 capsem.mtu=4000")
		if err != nil {
			t.Error(err)
			return
		}
		r, err := ConfigureNetwork(c, time.Second)
		if err != nil {
			t.Errorf("ConfigureNetwork: %v", err)
			return
		}
		if r.Interface != "eth0" || r.Addr.String() != "198.18.0.2/24" || r.MTU != 4000 || r.DHCP {
			t.Errorf("result %+v", r)
		}
		ifi, _ := net.InterfaceByName("eth0")
		addrs, _ := ifi.Addrs()
		if ifi.MTU != 4000 || ifi.Flags&net.FlagUp == 0 || len(addrs) != 1 || addrs[0].String() != "198.18.0.2/24" {
			t.Errorf("eth0: mtu %d flags %v addrs %v", ifi.MTU, ifi.Flags, addrs)
		}
		if lo, _ := net.InterfaceByName("lo"); lo.Flags&net.FlagUp == 0 {
			t.Error("lo is down")
		}
		if g := defaultGateway(t); g != "eth0 198.18.0.1" {
			t.Errorf("default route %q", g)
		}
		// Again (a retried boot step): replaces, does not fail.
		if _, err := ConfigureNetwork(c, time.Second); err != nil {
			t.Errorf("second ConfigureNetwork: %v", err)
		}
	}
}

func TestConfigureNetworkDHCP(t *testing.T) {
	needRoot(t)
	ip := ipTool(t)
	// The server gets a network namespace of its own (its goroutine's
	// thread): in one namespace the kernel drops the server's replies as
	// martians, their source address being local.
	type server struct {
		tid int
		err error
	}
	ready := make(chan server)
	configured := make(chan error)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ready <- server{err: err}
			return
		}
		ready <- server{tid: unix.Gettid()}
		if err := <-configured; err != nil {
			return
		}
		for _, args := range [][]string{{"addr", "add", "198.18.0.1/24", "dev", "host0"}, {"link", "set", "host0", "up"}} {
			if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
				t.Errorf("server: ip %v: %v %s", args, err, out)
				return
			}
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Errorf("server: %v", err)
			return
		}
		defer unix.Close(fd)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BROADCAST, 1)
		unix.BindToDevice(fd, "host0")
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: 67}); err != nil {
			t.Errorf("server: bind: %v", err)
			return
		}
		tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		buf := make([]byte, 1500)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil || n < 240 {
				continue
			}
			xid := binary.BigEndian.Uint32(buf[4:])
			mac := net.HardwareAddr(append([]byte(nil), buf[28:34]...))
			typ := byte(dhcpOffer)
			if strings.Contains(string(buf[240:n]), "\x35\x01\x03") {
				typ = dhcpAck
			}
			unix.Sendto(fd, reply(xid, mac, typ), 0, &unix.SockaddrInet4{Port: 68, Addr: [4]byte{255, 255, 255, 255}})
		}
	}()
	srv := <-ready
	if srv.err != nil {
		t.Skipf("unshare: %v", srv.err)
	}
	inNewNS(t, unix.CLONE_NEWNET)
	for _, args := range [][]string{
		{"link", "add", "eth0", "type", "veth", "peer", "name", "host0"},
		{"link", "set", "host0", "netns", strconv.Itoa(srv.tid)},
	} {
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			configured <- err
			t.Skipf("ip %v: %v %s", args, err, out)
		}
	}
	configured <- nil
	c, _ := bootparam.Parse("capsem.ip=dhcp")
	r, err := ConfigureNetwork(c, 10*time.Second)
	if err != nil {
		t.Fatalf("ConfigureNetwork with DHCP: %v", err)
	}
	if !r.DHCP || r.Addr.String() != "198.18.0.2/24" || r.Gateway.String() != "198.18.0.1" || len(r.DNS) != 2 || r.MTU != 1500 {
		t.Errorf("result %+v", r)
	}
	if g := defaultGateway(t); g != "eth0 198.18.0.1" {
		t.Errorf("default route %q", g)
	}
}

func TestWriteResolver(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.Symlink("/run/systemd/resolve/stub-resolv.conf", filepath.Join(root, "etc/resolv.conf"))
	if err := WriteResolver(root, "capsem", []netip.Addr{netip.MustParseAddr("198.18.0.1")}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(root, "etc/resolv.conf"))
	if !strings.Contains(string(b), "nameserver 198.18.0.1\n") {
		t.Fatalf("resolv.conf %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/hosts")); !strings.Contains(string(b), "capsem") {
		t.Fatalf("hosts %q", b)
	}
}

func TestLoadModulesMissing(t *testing.T) {
	loaded, err := LoadModules([]Module{{Path: "/nonexistent/virtio_net.ko"}})
	if len(loaded) != 0 || err == nil || !strings.Contains(err.Error(), "virtio_net") {
		t.Fatal(loaded, err)
	}
	if l, err := LoadModuleList("/nonexistent/capsem.order"); l != nil || err != nil {
		t.Fatal("a missing list is a kernel with everything built in", l, err)
	}
}

func TestOpenPortRawTTY(t *testing.T) {
	// A pty stands in for a virtconsole (/dev/hvcN): OpenPort makes it raw.
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no /dev/ptmx: %v", err)
	}
	defer m.Close()
	unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0)
	n, _ := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	f, err := OpenPort("/dev/pts/" + strconv.Itoa(int(n)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tio, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if tio.Lflag&(unix.ICANON|unix.ECHO|unix.ISIG) != 0 || tio.Oflag&unix.OPOST != 0 || tio.Iflag&unix.ICRNL != 0 {
		t.Fatalf("not raw: %+v", tio)
	}
	// Bytes pass unchanged both ways.
	in := []byte{0, 3, 4, '\n', '\r', 0x7f, 0xff}
	m.Write(in)
	got := make([]byte, len(in))
	f.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(f, got); err != nil || string(got) != string(in) {
		t.Fatalf("got % x, %v", got, err)
	}
	// A regular file (not a tty) opens as is.
	p := filepath.Join(t.TempDir(), "plain")
	os.WriteFile(p, nil, 0o600)
	if g, err := OpenPort(p); err != nil {
		t.Fatal(err)
	} else {
		g.Close()
	}
}

func TestListenVsock(t *testing.T) {
	fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	if err != nil {
		// No vsock here: then NewVsockListener says so.
		if _, err := NewVsockListener(1024); err == nil || !strings.Contains(err.Error(), "vsock") {
			t.Fatal(err)
		}
		t.Skip("no AF_VSOCK on this machine; checked the error only")
	}
	// Probe the loopback transport: nobody listens on this port, so with
	// vsock_loopback the connect is refused at once.
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	unix.SetsockoptTimeval(fd, unix.AF_VSOCK, unix.SO_VM_SOCKETS_CONNECT_TIMEOUT, &tv)
	perr := unix.Connect(fd, &unix.SockaddrVM{CID: unix.VMADDR_CID_LOCAL, Port: 52020})
	unix.Close(fd)
	if !errors.Is(perr, unix.ECONNRESET) && !errors.Is(perr, unix.ECONNREFUSED) {
		t.Skipf("no vsock loopback transport (vsock_loopback) on this machine: probe connect: %v", perr)
	}
	const port = 52021
	dialed := make(chan error, 1)
	go func() {
		for i := 0; i < 50; i++ {
			c, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				dialed <- err
				return
			}
			err = unix.Connect(c, &unix.SockaddrVM{CID: unix.VMADDR_CID_LOCAL, Port: port})
			if err == nil {
				unix.Write(c, []byte("hello"))
				unix.Close(c)
				dialed <- nil
				return
			}
			unix.Close(c)
			if !errors.Is(err, unix.ECONNRESET) && !errors.Is(err, unix.ECONNREFUSED) {
				dialed <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		dialed <- errors.New("listener never came up")
	}()
	ln, err := NewVsockListener(port)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ln.peer = unix.VMADDR_CID_LOCAL // the loopback's connections, not a host's
	f, err := ln.Accept(3 * time.Second)
	if err != nil {
		if derr := <-dialed; derr != nil {
			t.Skipf("no vsock loopback transport here (vsock_loopback): %v / %v", err, derr)
		}
		t.Fatal(err)
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if err != nil || string(got) != "hello" {
		t.Fatalf("%q %v", got, err)
	}
	if err := <-dialed; err != nil {
		t.Fatal(err)
	}
}
