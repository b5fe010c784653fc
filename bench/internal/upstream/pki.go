package upstream

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"

	"github.com/capsem/capsem/mitm/ca"
)

// WritePKI makes a CA of the benchmark's own with mitm/ca in
// dir/upstream-ca and writes a leaf of it for names and 127.0.0.1 into dir:
// it returns the CA's PEM file and the leaf's certificate and key files
// (upstream-leaf.pem, upstream-leaf-key.pem).
func WritePKI(dir string, names ...string) (caPath, certPath, keyPath string, err error) {
	a, err := ca.LoadOrCreate(filepath.Join(dir, "upstream-ca"))
	if err != nil {
		return "", "", "", err
	}
	leaf, err := a.LeafFor(append(slices.Clone(names), "127.0.0.1")...)
	if err != nil {
		return "", "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(leaf.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		return "", "", "", err
	}
	certPath, keyPath = filepath.Join(dir, "upstream-leaf.pem"), filepath.Join(dir, "upstream-leaf-key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]}), 0o644); err != nil {
		return "", "", "", err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", "", err
	}
	return a.CertPath(), certPath, keyPath, nil
}
