package bootparam

import (
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"strings"
)

// DecodeCA turns capsem.ca's value — base64 (standard or URL alphabet,
// padded or not) of a DER certificate or of a PEM file — into PEM. The
// command line is short (2 KiB on x86), so DER in URL-safe base64 is what
// the host should send; a CA of any size can come over the control channel
// instead (Hello.CA).
func DecodeCA(v string) ([]byte, error) {
	v = strings.TrimRight(v, "=")
	var raw []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.RawStdEncoding} {
		if raw, err = enc.DecodeString(v); err == nil {
			break
		}
	}
	if err != nil || len(raw) == 0 {
		return nil, fmt.Errorf("want base64 of a DER or PEM certificate")
	}
	if strings.HasPrefix(string(raw), "-----BEGIN") {
		return CheckPEM(raw)
	}
	if raw[0] != 0x30 { // an ASN.1 SEQUENCE
		return nil, fmt.Errorf("not a DER certificate")
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: raw}), nil
}

// CheckPEM verifies that b holds at least one PEM CERTIFICATE block and
// nothing but certificate blocks, and returns those blocks re-encoded.
func CheckPEM(b []byte) ([]byte, error) {
	var out []byte
	rest := b
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %q is not a CERTIFICATE", blk.Type)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: blk.Bytes})...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no PEM certificate")
	}
	return out, nil
}

// EncodeCA is capsem.ca's value for the PEM certificates b: base64 (URL
// alphabet, unpadded) of the DER of a single certificate — the command line
// is short (2 KiB on x86), and DER is 3/4 of PEM — or of the PEM when b
// holds several.
func EncodeCA(b []byte) string {
	blk, rest := pem.Decode(b)
	if blk != nil && blk.Type == "CERTIFICATE" && len(strings.TrimSpace(string(rest))) == 0 {
		return base64.RawURLEncoding.EncodeToString(blk.Bytes)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
