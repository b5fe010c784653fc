package bootparam

import (
	"encoding/base64"
	"encoding/pem"
	"testing"
)

func TestDecodeCA(t *testing.T) {
	pemIn := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{0x30, 1, 2}})
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
		out, err := DecodeCA(enc.EncodeToString(pemIn))
		if err != nil || string(out) != string(pemIn) {
			t.Fatalf("%q %v", out, err)
		}
	}
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}})
	if _, err := DecodeCA(base64.StdEncoding.EncodeToString(key)); err == nil {
		t.Fatal("a private key accepted as a CA")
	}
	if _, err := CheckPEM([]byte("garbage")); err == nil {
		t.Fatal("garbage accepted")
	}
}
