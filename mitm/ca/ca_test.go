package ca

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCreateThenLoadSameCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	a, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v, want 0600", fi.Mode().Perm())
	}
	di, _ := os.Stat(dir)
	if di.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v, want 0700", di.Mode().Perm())
	}
	b, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Fingerprint() != b.Fingerprint() {
		t.Fatal("second load made a different CA")
	}
	if !a.Certificate().IsCA || a.Certificate().PublicKeyAlgorithm != x509.ECDSA {
		t.Fatalf("CA cert: IsCA=%v alg=%v", a.Certificate().IsCA, a.Certificate().PublicKeyAlgorithm)
	}
}

func TestTwoInstallationsDiffer(t *testing.T) {
	a, err := LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if a.Fingerprint() == b.Fingerprint() || a.Certificate().Subject.CommonName == b.Certificate().Subject.CommonName {
		t.Fatal("two installations produced the same CA")
	}
}

func TestRefusesLooseKey(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrCreate(dir); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, KeyFile), 0o644)
	_, err := LoadOrCreate(dir)
	if err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("loose key: got %v", err)
	}
}

func TestRefusesHalfCA(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrCreate(dir); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, CertFile))
	if _, err := LoadOrCreate(dir); err == nil || !strings.Contains(err.Error(), "capsem ca rotate") {
		t.Fatalf("half CA: got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, CertFile)); err == nil {
		t.Fatal("a half CA was silently completed")
	}
}

func TestRotateChangesCA(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Rotate(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Fingerprint() == b.Fingerprint() || b.Fingerprint() != c.Fingerprint() {
		t.Fatalf("rotate: before %s after %s reload %s", a.Fingerprint()[:8], b.Fingerprint()[:8], c.Fingerprint()[:8])
	}
}

func TestLeafVerifiesAgainstCA(t *testing.T) {
	a, err := LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := a.Leaf("API.Example.test.")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(a.Certificate())
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "api.example.test", Roots: roots}); err != nil {
		t.Fatalf("leaf does not verify: %v", err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "other.example.test", Roots: roots}); err == nil {
		t.Fatal("leaf verified for another name")
	}
	if life := leaf.Leaf.NotAfter.Sub(time.Now()); life > LeafValidity || life < LeafValidity-time.Minute {
		t.Fatalf("leaf lifetime %v, want about %v", life, LeafValidity)
	}
	again, _ := a.Leaf("api.example.test")
	if again != leaf {
		t.Fatal("leaf was not cached")
	}
	// The chain a TLS client gets includes the CA.
	if len(leaf.Certificate) != 2 {
		t.Fatalf("chain length %d", len(leaf.Certificate))
	}
}

func TestLeafCacheIsBounded(t *testing.T) {
	a, err := LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a.leaves = newLeafCache(8)
	first, _ := a.Leaf("n0.test")
	for i := 1; i < 20; i++ {
		if _, err := a.Leaf(fmt.Sprintf("n%d.test", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := a.leaves.len(); n != 8 {
		t.Fatalf("cache holds %d leaves, want 8", n)
	}
	if again, _ := a.Leaf("n0.test"); again == first {
		t.Fatal("evicted leaf came back from the cache")
	}
}

func TestExpiringLeafIsRenewed(t *testing.T) {
	a, err := LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	old, err := a.mint([]string{"x.test"}, time.Now().Add(-LeafValidity+30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	a.leaves.put("x.test", old)
	fresh, _ := a.Leaf("x.test")
	if fresh == old {
		t.Fatal("a leaf with 30 minutes left was served from the cache")
	}
}

func BenchmarkMintLeaf(b *testing.B) {
	a, err := LoadOrCreate(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for b.Loop() {
		if _, err := a.mint([]string{"bench.test"}, now); err != nil {
			b.Fatal(err)
		}
	}
}

func TestLeafForSeveralNames(t *testing.T) {
	a, err := LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := a.LeafFor("mitm.test", "pass.test", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(a.Certificate())
	for _, c := range []struct {
		name string
		ok   bool
		why  string
	}{
		{"mitm.test", true, "the first name, also the common name"},
		{"pass.test", true, "every name given is in the leaf"},
		{"127.0.0.1", true, "an address goes in as an IP SAN"},
		{"other.test", false, "no name it was not given"},
	} {
		_, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: c.name, Roots: roots})
		if (err == nil) != c.ok {
			t.Errorf("%s: verify error %v, want ok=%v: %s", c.name, err, c.ok, c.why)
		}
	}
	if again, _ := a.LeafFor("mitm.test"); again == leaf {
		t.Error("LeafFor returned a cached leaf")
	}
	if _, err := a.LeafFor(); err == nil {
		t.Error("LeafFor with no name minted a leaf")
	}
}
