package ca

import (
	"container/list"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Leaf lifetimes: a leaf is valid from an hour before it is minted (guest
// clock skew) for LeafValidity, and re-minted once less than LeafRenewBefore
// of it is left.
const (
	LeafValidity         = 24 * time.Hour
	LeafRenewBefore      = time.Hour
	DefaultLeafCacheSize = 1024
)

// Leaf returns a certificate for name signed by the CA, from the cache when
// a fresh one is there. name is a DNS name as sent in SNI; it is lowered.
func (a *Authority) Leaf(name string) (*tls.Certificate, error) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if name == "" {
		return nil, errors.New("capsem CA: no server name to mint a certificate for")
	}
	now := time.Now()
	if c := a.leaves.get(name, now); c != nil {
		return c, nil
	}
	c, err := a.mint([]string{name}, now)
	if err != nil {
		return nil, err
	}
	a.leaves.put(name, c)
	return c, nil
}

// LeafFor mints a certificate valid for every one of names (DNS names or IP
// addresses; the first is its common name), signed by the CA and not
// cached: for a server of capsem's own that answers under several names,
// such as the doctor's and the tests' stand-in upstreams.
func (a *Authority) LeafFor(names ...string) (*tls.Certificate, error) {
	if len(names) == 0 || names[0] == "" {
		return nil, errors.New("capsem CA: no name to mint a certificate for")
	}
	return a.mint(names, time.Now())
}

func (a *Authority) mint(names []string, now time.Time) (*tls.Certificate, error) {
	name := names[0]
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("capsem CA leaf key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(LeafValidity)
	if notAfter.After(a.cert.NotAfter) {
		notAfter = a.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	for _, n := range names {
		if ip, err := netip.ParseAddr(n); err == nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, fmt.Errorf("capsem CA leaf for %s: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("capsem CA leaf for %s: %w", name, err)
	}
	return &tls.Certificate{
		Certificate: [][]byte{der, a.certDER},
		PrivateKey:  key,
		Leaf:        leaf,
	}, nil
}

// leafCache is a bounded LRU of minted leaves.
type leafCache struct {
	mu     sync.Mutex
	max    int
	order  *list.List // front = most recently used; values are *leafEntry
	byName map[string]*list.Element
}

type leafEntry struct {
	name string
	cert *tls.Certificate
}

func newLeafCache(max int) *leafCache {
	return &leafCache{max: max, order: list.New(), byName: make(map[string]*list.Element)}
}

func (c *leafCache) get(name string, now time.Time) *tls.Certificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byName[name]
	if !ok {
		return nil
	}
	e := el.Value.(*leafEntry)
	if now.Add(LeafRenewBefore).After(e.cert.Leaf.NotAfter) {
		c.order.Remove(el)
		delete(c.byName, name)
		return nil
	}
	c.order.MoveToFront(el)
	return e.cert
}

func (c *leafCache) put(name string, cert *tls.Certificate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byName[name]; ok {
		el.Value.(*leafEntry).cert = cert
		c.order.MoveToFront(el)
		return
	}
	c.byName[name] = c.order.PushFront(&leafEntry{name: name, cert: cert})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byName, last.Value.(*leafEntry).name)
	}
}

func (c *leafCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
