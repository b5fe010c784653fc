package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/capsem/capsem/guest/proto"
)

// doctorUpstream is the HTTPS service the doctor's network tests reach as
// doctorHost through capsem's MITM. It runs on loopback with a leaf of a
// throwaway CA of its own, which the doctor's policy trusts (ca_files) —
// the way a public CA is trusted for real upstreams.
type doctorUpstream struct {
	srv       *http.Server
	ln        net.Listener
	port      int
	caFile    string
	workspace string

	mu     sync.Mutex
	events []fileEventJSON
}

type fileEventJSON struct {
	Action string `json:"action"`
	Path   string `json:"path"`
}

// maxDoctorBytes caps /bytes.
const maxDoctorBytes = 64 << 20

func startDoctorUpstream(work, workspace string) (*doctorUpstream, error) {
	caCert, caKey, err := newDoctorCA()
	if err != nil {
		return nil, err
	}
	leaf, err := doctorLeaf(caCert, caKey, doctorHost)
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(work, "doctor-upstream-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw}), 0o644); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &doctorUpstream{ln: ln, port: ln.Addr().(*net.TCPAddr).Port, caFile: caFile, workspace: workspace}
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "capsem-doctor-ok")
	})
	mux.HandleFunc("/bytes", u.bytes)
	mux.HandleFunc("/admin/", func(w http.ResponseWriter, r *http.Request) {
		// capsem's [[http]] rule must stop the request before it gets here.
		io.WriteString(w, "the doctor's admin page: capsem should have refused this request")
	})
	mux.HandleFunc("/fs-events", u.fsEvents)
	mux.HandleFunc("/workspace-file", u.workspaceFile)
	u.srv = &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{leaf}, NextProtos: []string{"h2", "http/1.1"}},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() { _ = u.srv.ServeTLS(ln, "", "") }()
	return u, nil
}

func (u *doctorUpstream) Close() error { return u.srv.Close() }

// recordFileEvent notes a workspace event capsem recorded in the session.
func (u *doctorUpstream) recordFileEvent(ev proto.FileEvent) {
	u.mu.Lock()
	u.events = append(u.events, fileEventJSON{Action: ev.Action, Path: ev.Path})
	u.mu.Unlock()
}

func (u *doctorUpstream) bytes(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
	if err != nil || n < 0 || n > maxDoctorBytes {
		http.Error(w, fmt.Sprintf("n: want 0..%d", maxDoctorBytes), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	chunk := []byte(strings.Repeat("x", 64<<10))
	for n > 0 {
		k := min(n, int64(len(chunk)))
		if _, err := w.Write(chunk[:k]); err != nil {
			return
		}
		n -= k
	}
}

func (u *doctorUpstream) fsEvents(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	evs := append([]fileEventJSON{}, u.events...)
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(evs)
}

// workspaceFile serves a file of the shared workspace as the host sees it.
func (u *doctorUpstream) workspaceFile(w http.ResponseWriter, r *http.Request) {
	rel := r.URL.Query().Get("path")
	clean := filepath.Clean("/" + rel)
	if rel == "" || clean == "/" {
		http.Error(w, "path: want a file in the workspace", http.StatusBadRequest)
		return
	}
	// The guest controls the workspace: a symlink must not lead the host
	// out of it.
	real, err := filepath.EvalSymlinks(filepath.Join(u.workspace, clean))
	root, rerr := filepath.EvalSymlinks(u.workspace)
	if err == nil && (rerr != nil || !strings.HasPrefix(real, root+string(filepath.Separator))) {
		http.Error(w, "path leaves the workspace", http.StatusForbidden)
		return
	}
	var b []byte
	if err == nil {
		b, err = os.ReadFile(real)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(b)
}

func newDoctorCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "capsem doctor upstream CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func doctorLeaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano() + 1),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
