package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCapsem(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"capsem"}, args...), &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

func TestCAPathExportRotate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	out, errOut, code := runCapsem(t, "ca", "path", "--ca-dir", dir)
	if code != 0 || strings.TrimSpace(out) != filepath.Join(dir, "ca.pem") {
		t.Fatalf("ca path: exit %d, %q %q", code, out, errOut)
	}
	fi, err := os.Stat(filepath.Join(dir, "ca-key.pem"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	exported, _, code := runCapsem(t, "ca", "export", "--ca-dir", dir)
	block, _ := pem.Decode([]byte(exported))
	if code != 0 || block == nil || strings.Contains(exported, "PRIVATE") {
		t.Fatalf("ca export: exit %d, %q", code, exported)
	}
	before, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !before.IsCA {
		t.Fatalf("exported certificate: %v", err)
	}
	outFile := filepath.Join(t.TempDir(), "capsem.pem")
	if _, _, code := runCapsem(t, "ca", "export", "--ca-dir", dir, "--out", outFile); code != 0 {
		t.Fatal("ca export --out failed")
	}
	if b, _ := os.ReadFile(outFile); string(b) != exported {
		t.Fatal("ca export --out wrote something else")
	}
	out, _, code = runCapsem(t, "ca", "rotate", "--ca-dir", dir)
	if code != 0 || !strings.Contains(out, "new capsem CA") {
		t.Fatalf("ca rotate: exit %d, %q", code, out)
	}
	after, _, _ := runCapsem(t, "ca", "export", "--ca-dir", dir)
	if after == exported {
		t.Fatal("rotate kept the same CA")
	}
}

func TestCARefusesLooseKey(t *testing.T) {
	dir := t.TempDir()
	if _, _, code := runCapsem(t, "ca", "path", "--ca-dir", dir); code != 0 {
		t.Fatal("ca path failed")
	}
	os.Chmod(filepath.Join(dir, "ca-key.pem"), 0o644)
	_, errOut, code := runCapsem(t, "ca", "export", "--ca-dir", dir)
	if code != 1 || !strings.Contains(errOut, "chmod 600") {
		t.Fatalf("loose key: exit %d, %q", code, errOut)
	}
}
