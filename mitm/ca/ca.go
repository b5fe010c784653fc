package ca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// File names inside the CA directory.
const (
	CertFile = "ca.pem"
	KeyFile  = "ca-key.pem"
)

// CAValidity is how long a generated CA is valid.
const CAValidity = 10 * 365 * 24 * time.Hour

// DefaultDir is where the CA lives unless told otherwise:
// $XDG_CONFIG_HOME/capsem/ca, else ~/.config/capsem/ca.
func DefaultDir() (string, error) {
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no config directory for the capsem CA: %w", err)
	}
	return filepath.Join(d, "capsem", "ca"), nil
}

// Authority is a loaded CA able to mint leaf certificates. It is safe for
// concurrent use.
type Authority struct {
	dir     string
	cert    *x509.Certificate
	certDER []byte
	key     *ecdsa.PrivateKey
	leaves  *leafCache
}

// Dir is the directory the CA was loaded from.
func (a *Authority) Dir() string { return a.dir }

// CertPath is the path of the CA certificate (PEM), the file a guest trusts.
func (a *Authority) CertPath() string { return filepath.Join(a.dir, CertFile) }

// Certificate is the CA certificate.
func (a *Authority) Certificate() *x509.Certificate { return a.cert }

// CertPEM is the CA certificate, PEM-encoded.
func (a *Authority) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.certDER})
}

// Fingerprint is the SHA-256 of the CA certificate, in hex.
func (a *Authority) Fingerprint() string {
	sum := sha256.Sum256(a.certDER)
	return hex.EncodeToString(sum[:])
}

// LoadOrCreate loads the CA in dir, generating it first when the directory
// holds none. A directory holding only one of the two files, a key readable
// by anyone but its owner, or a key that does not match the certificate is
// an error: capsem never silently replaces or uses a damaged CA.
func LoadOrCreate(dir string) (*Authority, error) {
	return locked(dir, func() error {
		return createIfAbsent(dir)
	})
}

func createIfAbsent(dir string) error {
	_, certErr := os.Stat(filepath.Join(dir, CertFile))
	_, keyErr := os.Stat(filepath.Join(dir, KeyFile))
	switch {
	case errors.Is(certErr, os.ErrNotExist) && errors.Is(keyErr, os.ErrNotExist):
		return generate(dir)
	case errors.Is(certErr, os.ErrNotExist) || errors.Is(keyErr, os.ErrNotExist):
		return fmt.Errorf("capsem CA in %s is incomplete (one of %s, %s is missing); run `capsem ca rotate` to make a new one", dir, CertFile, KeyFile)
	}
	return nil
}

// Rotate replaces the CA in dir with a freshly generated one and returns it.
// Guests started afterwards trust the new CA only; leaves of the old one
// stop being accepted by them.
func Rotate(dir string) (*Authority, error) {
	return locked(dir, func() error { return generate(dir) })
}

// locked runs prepare and then loads the CA, with dir created and locked
// against other processes doing the same.
func locked(dir string, prepare func() error) (*Authority, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("capsem CA: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := prepare(); err != nil {
		return nil, err
	}
	return load(dir)
}

func load(dir string) (*Authority, error) {
	keyPath := filepath.Join(dir, KeyFile)
	fi, err := os.Stat(keyPath)
	if err != nil {
		return nil, fmt.Errorf("capsem CA: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("capsem CA key %s has mode %v: it must be readable by its owner only (chmod 600 %s)", keyPath, fi.Mode().Perm(), keyPath)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("capsem CA: %w", err)
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, CertFile))
	if err != nil {
		return nil, fmt.Errorf("capsem CA: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("capsem CA in %s is damaged: %w; run `capsem ca rotate` to make a new one", dir, err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("capsem CA key in %s is not an ECDSA key", dir)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("capsem CA certificate in %s: %w", dir, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("capsem CA certificate in %s is not a CA certificate", dir)
	}
	if time.Now().After(cert.NotAfter) {
		return nil, fmt.Errorf("capsem CA in %s expired on %s; run `capsem ca rotate`", dir, cert.NotAfter.Format(time.DateOnly))
	}
	return &Authority{dir: dir, cert: cert, certDER: pair.Certificate[0], key: key, leaves: newLeafCache(DefaultLeafCacheSize)}, nil
}

// generate writes a new key and certificate into dir, each through a
// temporary file renamed into place, key first.
func generate(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("capsem CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			Organization: []string{"capsem"},
			CommonName:   fmt.Sprintf("capsem CA %s %s", host, serial.Text(16)[:8]),
		},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("capsem CA certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("capsem CA key: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, KeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, CertFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func randomSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("capsem CA serial: %w", err)
	}
	return serial.Add(serial, big.NewInt(1)), nil
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("capsem CA: %w", err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("capsem CA: %w", err)
	}
	if err := f.Chmod(mode); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("capsem CA: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("capsem CA: %w", err)
	}
	return nil
}
