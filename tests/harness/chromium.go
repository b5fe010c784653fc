package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ChromiumRequirements returns why headless chromium cannot run here, or ""
// when it can: Debian's chromium, and certutil (libnss3-tools) to give it a
// CA, as `go tool task deps` installs them.
func ChromiumRequirements() string {
	for _, t := range []string{"chromium", "certutil"} {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Sprintf("needs %q on PATH (apt-get install chromium libnss3-tools; `go tool task deps` does)", t)
		}
	}
	return ""
}

// Chromium is a fresh chromium profile: a HOME whose NSS database trusts
// one CA, and a user data directory of its own, so no two runs share a
// cache, an Alt-Svc memory or a QUIC server-config.
type Chromium struct {
	Home    string // $HOME: chromium on Linux reads its roots from $HOME/.pki/nssdb
	DataDir string // --user-data-dir
}

// NewChromium makes a profile under dir whose NSS database trusts the CA
// certificate at caPEM. Chromium accepts a root added this way over QUIC
// only for origins named in --origin-to-force-quic-on (over TCP for all).
func NewChromium(dir, caPEM string) (*Chromium, error) {
	c := &Chromium{Home: filepath.Join(dir, "home"), DataDir: filepath.Join(dir, "profile")}
	db := filepath.Join(c.Home, ".pki", "nssdb")
	for _, d := range []string{db, c.DataDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	for _, args := range [][]string{
		{"-d", "sql:" + db, "-N", "--empty-password"},
		{"-d", "sql:" + db, "-A", "-n", "capsem-test-ca", "-t", "C,,", "-i", caPEM},
	} {
		if out, err := exec.Command("certutil", args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("certutil %v: %v: %s", args, err, out)
		}
	}
	return c, nil
}

// Env is the environment chromium runs with: HOME pointing at the profile.
func (c *Chromium) Env() []string {
	return append(os.Environ(), "HOME="+c.Home)
}

// Args are chromium's arguments to load url headless and print its DOM,
// followed by extra. --no-sandbox because the tests run as root; the rest
// keep chromium from reaching for Google's services, which the tests'
// policies deny and whose refusals would only add noise to the events.
func (c *Chromium) Args(url string, extra ...string) []string {
	args := []string{
		"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir=" + c.DataDir,
		"--no-first-run", "--no-default-browser-check",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-features=MediaRouter,OptimizationHints,Translate",
		"--dump-dom",
	}
	return append(append(args, extra...), url)
}
