package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
)

func TestWritePKI(t *testing.T) {
	names := []string{"mitm.test", "pass.test"}
	caPath, certPath, keyPath, err := WritePKI(t.TempDir(), names...)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		t.Fatalf("the leaf and its key do not load as a pair: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s holds no certificate", caPath)
	}
	for _, c := range []struct{ name, why string }{
		{"mitm.test", "a name asked for"},
		{"pass.test", "every name asked for, not only the first"},
		{"127.0.0.1", "the loopback address the host's clients dial"},
	} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: c.name}); err != nil {
			t.Errorf("the leaf does not verify for %s against the written CA: %v (%s)", c.name, err, c.why)
		}
	}
	if len(names) != 2 || names[1] != "pass.test" {
		t.Errorf("WritePKI changed its argument: %q", names)
	}
}
