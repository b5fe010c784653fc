package policy

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// maxCAFileSize caps what Load reads of one ca_files entry.
const maxCAFileSize = 16 << 20

// Load reads the policy file at path and parses it (see Parse). Error
// messages name the file as path was given; Policy.Source is the absolute
// path. Relative ca_files are resolved against the file's directory, and
// Load reads each of them to check that it is a regular file of PEM
// certificates that all parse (other PEM blocks are ignored), so that a bad
// CA file is a policy error at its line rather than a failure later.
func Load(path string) (*Policy, error) {
	return LoadWith(path, nil)
}

// LoadWith is Load with secrets from --secret flags, as ParseWith.
func LoadWith(path string, secrets []Secret) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the policy file: %w; check the path", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	p, caLines, err := parse(path, filepath.Dir(abs), data, secrets)
	if err != nil {
		return nil, err
	}
	p.Source = abs
	var errs []error
	for i, f := range p.CAFiles {
		st, err := os.Stat(f)
		msg := ""
		switch {
		case errors.Is(err, os.ErrNotExist):
			msg = fmt.Sprintf("%s does not exist; fix the path (relative paths are relative to the policy file's directory)", f)
		case err != nil:
			msg = fmt.Sprintf("cannot use %s: %v", f, err)
		case !st.Mode().IsRegular():
			msg = fmt.Sprintf("%s is not a regular file; name a PEM file of CA certificates", f)
		default:
			msg = checkCAFile(f)
		}
		if msg != "" {
			errs = append(errs, &Error{File: path, Line: caLines[i], Msg: "ca_files entry: " + msg})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// checkCAFile reads a ca_files entry and returns what is wrong with it, or
// "".
func checkCAFile(f string) string {
	fh, err := os.Open(f)
	if err != nil {
		return fmt.Sprintf("cannot read %s: %v", f, err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxCAFileSize+1))
	switch {
	case err != nil:
		return fmt.Sprintf("cannot read %s: %v", f, err)
	case len(data) > maxCAFileSize:
		return fmt.Sprintf("%s is larger than %d MiB, too large for a PEM file of CA certificates; name the right file", f, maxCAFileSize>>20)
	}
	certs := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		certs++
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Sprintf("certificate %d of %s does not parse (%v); replace it with a valid PEM certificate", certs, f, err)
		}
	}
	if certs == 0 {
		return fmt.Sprintf("%s holds no PEM certificate (no \"-----BEGIN CERTIFICATE-----\" block); name a PEM file of CA certificates", f)
	}
	return ""
}
