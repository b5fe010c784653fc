package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBadInvocationsExit2WithAClearMessage(t *testing.T) {
	dir := t.TempDir()
	badPolicy := filepath.Join(dir, "bad.toml")
	os.WriteFile(badPolicy, []byte("[network]\nallow = [\"foo*.com\"]\n"), 0o644)
	sock := "unix://" + filepath.Join(dir, "s.sock")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", dir}, "exactly one of --listen-qemu"},
		{[]string{"--data", dir, "--listen-qemu", sock, "--listen-bess", "unixpacket://" + dir + "/b"}, "exactly one of"},
		{[]string{"--data", dir, "--listen-qemu", "tcp://127.0.0.1:1"}, "want unix:///absolute/path"},
		{[]string{"--data", dir, "--listen-qemu", sock, "--mtu", "70000"}, "--mtu 70000"},
		{[]string{"--data", dir, "--listen-qemu", sock, "--policy", badPolicy}, "bad.toml:2"},
		{[]string{"--data", dir, "--listen-qemu", sock, "--policy", filepath.Join(dir, "missing.toml")}, "missing.toml"},
		{[]string{"--data", dir, "--listen-qemu", sock, "--guest-mac", "nope"}, "--guest-mac"},
		{[]string{"--data", dir, "--listen-qemu", sock, "--no-such-flag"}, "no-such-flag"},
		{[]string{"--data", dir, "--listen-fd", "99"}, "fd 99"},
		{[]string{"--data", dir, "--listen-qemu", sock, "extra"}, "unexpected argument"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"capsem-net"}, c.args...), &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 mentioning %q", c.args, code, stderr.String(), c.want)
		}
	}
}

func TestVersionAndHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"capsem-net", "--version"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "capsem-net version") {
		t.Errorf("--version: exit %d, %q", code, stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"capsem-net", "--help"}, &stdout, &stderr); code != 0 {
		t.Errorf("--help: exit %d", code)
	}
	for _, flag := range []string{"--listen-qemu", "--listen-vfkit", "--listen-bess", "--listen-fd", "--mtu", "--pcap", "--policy", "--data"} {
		if !strings.Contains(stdout.String(), flag) {
			t.Errorf("--help does not mention %s", flag)
		}
	}
}
