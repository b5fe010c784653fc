package upstream

import (
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/capsem/capsem/policy"
)

// rootsCache builds the upstream verification pool for a policy once.
type rootsCache struct {
	system func() (*x509.CertPool, error) // the system roots, loaded once (Transports' New)
	mu     sync.Mutex
	key    string
	pool   *x509.CertPool
}

func (r *rootsCache) get(pol *policy.Policy) (*x509.CertPool, error) {
	system, err := r.system()
	if err != nil {
		return nil, err
	}
	files := pol.UpstreamCAFiles()
	if len(files) == 0 {
		return system, nil
	}
	key := strings.Join(files, "\x00")
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.key == key && r.pool != nil {
		return r.pool, nil
	}
	pool := system.Clone()
	for _, f := range files {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("[upstream] ca_files: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("[upstream] ca_files: %s holds no PEM certificate", f)
		}
	}
	r.key, r.pool = key, pool
	return pool, nil
}
