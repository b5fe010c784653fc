package ca

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The seal key signs the head of each session's hash chain (store/chain.go)
// so that an edited record cannot be re-chained by whoever can write the
// store or an export but not read this directory. It lives beside the CA,
// under the same lock and the same rule: readable by its owner only, never
// replaced silently. `capsem ca rotate` replaces the CA, not this key:
// sessions sealed before a rotation verify against it still.
const (
	SealKeyFile = "seal-key.pem" // PKCS #8 ed25519 private key, mode 0600
	SealPubFile = "seal.pub"     // its public half, PKIX PEM, mode 0644: what a verifier trusts
)

// LoadOrCreateSealKey loads the seal key in dir ("": DefaultDir()),
// generating it on first use. A key readable by others than its owner, or
// one that does not parse, is an error that says what to do.
func LoadOrCreateSealKey(dir string) (ed25519.PrivateKey, error) {
	if dir == "" {
		var err error
		if dir, err = DefaultDir(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("capsem seal key: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	path := filepath.Join(dir, SealKeyFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if err := generateSealKey(dir); err != nil {
			return nil, err
		}
	}
	return loadSealKey(path)
}

func loadSealKey(path string) (ed25519.PrivateKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("capsem seal key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("capsem seal key %s has mode %v: it must be readable by its owner only (chmod 600 %s)", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("capsem seal key: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("capsem seal key %s is not a PEM private key; move it away and a new one is made (sessions it sealed then verify only with --key and its seal.pub)", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("capsem seal key %s: %w", path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("capsem seal key %s is a %T, not an ed25519 key", path, k)
	}
	return key, nil
}

func generateSealKey(dir string) error {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("capsem seal key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("capsem seal key: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, SealKeyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, SealPubFile), EncodeSealPub(pub), 0o644)
}

// EncodeSealPub is a seal key's public half as seal.pub holds it.
func EncodeSealPub(pub ed25519.PublicKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(pub) // cannot fail for an ed25519 key
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// ParseSealPub reads a public key as seal.pub holds it (PKIX PEM), or as
// 64 hex digits (the export's chain_key).
func ParseSealPub(b []byte) (ed25519.PublicKey, error) {
	if block, _ := pem.Decode(b); block != nil {
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("capsem seal key: %w", err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("capsem seal key: a %T, not an ed25519 public key", k)
		}
		return pub, nil
	}
	h, err := hex.DecodeString(string(bytes.TrimSpace(b)))
	if err != nil || len(h) != ed25519.PublicKeySize {
		return nil, errors.New("capsem seal key: neither a PEM public key nor 64 hex digits")
	}
	return ed25519.PublicKey(h), nil
}

// SealFingerprint names a seal key in messages: the first 16 hex digits
// of the SHA-256 of its public half.
func SealFingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}
