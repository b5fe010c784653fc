package ca

import (
	"crypto/ed25519"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSealKey(t *testing.T) {
	dir := t.TempDir()
	k1, err := LoadOrCreateSealKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := LoadOrCreateSealKey(dir)
	if err != nil || !k1.Equal(k2) {
		t.Fatalf("second load: %v, same key %v", err, k1.Equal(k2))
	}
	fi, _ := os.Stat(filepath.Join(dir, SealKeyFile))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("seal key mode %v, want 0600", fi.Mode().Perm())
	}
	pubPEM, err := os.ReadFile(filepath.Join(dir, SealPubFile))
	if err != nil {
		t.Fatal(err)
	}
	pub := k1.Public().(ed25519.PublicKey)
	for _, in := range [][]byte{pubPEM, []byte(hex.EncodeToString(pub) + "\n")} {
		if got, err := ParseSealPub(in); err != nil || !got.Equal(pub) {
			t.Errorf("ParseSealPub(%q) = %x, %v", in, got, err)
		}
	}
	// Rotating the CA keeps the seal key: old sessions still verify.
	if _, err := Rotate(dir); err != nil {
		t.Fatal(err)
	}
	if k3, _ := LoadOrCreateSealKey(dir); !k3.Equal(k1) {
		t.Error("ca rotate replaced the seal key")
	}
	// A key others can read is refused, with what to do.
	os.Chmod(filepath.Join(dir, SealKeyFile), 0o644)
	if _, err := LoadOrCreateSealKey(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable key: %v", err)
	}
}
