package boot

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/capsem/capsem/guest/bootparam"
)

// Where the CA goes, relative to the guest's root.
const (
	CABundle = "/etc/ssl/certs/ca-certificates.crt"          // the system store (Debian layout)
	CAFile   = "/usr/local/share/ca-certificates/capsem.crt" // the CA alone
)

// certifiGlobs find python's certifi bundles (and pip's vendored copy).
var certifiGlobs = []string{
	"/usr/lib/python3*/*-packages/certifi/cacert.pem",
	"/usr/local/lib/python3*/*-packages/certifi/cacert.pem",
	"/usr/lib/python3*/*-packages/pip/_vendor/certifi/cacert.pem",
	"/usr/local/lib/python3*/*-packages/pip/_vendor/certifi/cacert.pem",
	"/opt/*/lib/python3*/site-packages/certifi/cacert.pem",
	"/root/.local/lib/python3*/site-packages/certifi/cacert.pem",
}

// CAEnv is the environment that points TLS clients at the installed CA:
// OpenSSL, Python requests, curl at the bundle (which keeps the public
// roots), Node at the CA alone (NODE_EXTRA_CA_CERTS adds to its own roots).
func CAEnv() []string {
	return []string{
		"SSL_CERT_FILE=" + CABundle,
		"REQUESTS_CA_BUNDLE=" + CABundle,
		"CURL_CA_BUNDLE=" + CABundle,
		"NODE_EXTRA_CA_CERTS=" + CAFile,
	}
}

// InstallCA adds the PEM certificate(s) pemData to the trust stores of the
// guest whose root is root: it writes CAFile, appends to CABundle (creating
// it if the image has none) and to every certifi cacert.pem found. A store
// that already holds the certificate is left alone, so installing twice
// changes nothing. It returns the files written (as guest paths).
func InstallCA(root string, pemData []byte) ([]string, error) {
	pemData, err := bootparam.CheckPEM(pemData)
	if err != nil {
		return nil, fmt.Errorf("install CA: %w", err)
	}
	var written []string
	caPath := filepath.Join(root, CAFile)
	if err := os.MkdirAll(filepath.Dir(caPath), 0o755); err != nil {
		return nil, fmt.Errorf("install CA: %w", err)
	}
	if err := os.WriteFile(caPath, pemData, 0o644); err != nil {
		return nil, fmt.Errorf("install CA: %w", err)
	}
	written = append(written, CAFile)

	targets := []string{CABundle}
	for _, g := range certifiGlobs {
		m, _ := filepath.Glob(filepath.Join(root, g))
		sort.Strings(m)
		for _, p := range m {
			rel, _ := filepath.Rel(root, p)
			targets = append(targets, "/"+filepath.ToSlash(rel))
		}
	}
	for _, t := range targets {
		changed, err := appendCert(filepath.Join(root, t), pemData, t == CABundle)
		if err != nil {
			return written, fmt.Errorf("install CA into %s: %w", t, err)
		}
		if changed {
			written = append(written, t)
		}
	}
	return written, nil
}

// appendCert appends pemData to the bundle at p unless it is already there.
// A bundle that is a symlink is followed (Debian's certifi points at the
// system bundle, which then already holds the CA).
func appendCert(p string, pemData []byte, create bool) (bool, error) {
	old, err := os.ReadFile(p)
	switch {
	case os.IsNotExist(err) && create:
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return false, err
		}
	case err != nil:
		return false, err
	}
	if bytes.Contains(old, bytes.TrimSpace(pemData)) {
		return false, nil
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return false, err
	}
	var b []byte
	if len(old) > 0 && old[len(old)-1] != '\n' {
		b = append(b, '\n')
	}
	b = append(b, pemData...)
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err == nil, err
}
