package home

// settings.json, a sandbox's settings: how it is started. Written by
// `capsem start` (at creation, and again by a start with flags), read by
// the supervisor at each start and by `capsem ls`. One JSON object,
// indented, 0600:
//
//	{
//	  "name": "dev",
//	  "created": "2025-01-02T03:04:05Z",       RFC 3339, UTC
//	  "image": "<guest image id>",             its files are in image/
//	  "arch": "arm64",                         the image's; absent: amd64
//	  "policy": "/abs/policy.toml",            "": the default policy
//	  "workspace": "/abs/dir",                 shared as /workspace
//	  "env": ["K=V", …],                       for every command, under each exec's env
//	  "secrets": ["NAME@HOST,…", …],           --secret flags; never a real value
//	  "cpus": 2,
//	  "memory_mib": 2048,
//	  "disk_gib": 8                            the writable disk's cap
//	}
//
// STABILITY: a newer capsem reads an older sandbox's file and the other
// way round. Add fields (their zero value meaning what an older file
// meant); never rename, retype or remove one.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/capsem/capsem/guest/arch"
	"github.com/capsem/capsem/ports"
	"github.com/capsem/capsem/sandbox/api"
)

// Settings is settings.json.
type Settings struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	Image   string    `json:"image"` // the guest's id: its files are in image/
	// Arch is the image's architecture; "" (a sandbox made before arm64)
	// is amd64.
	Arch      arch.Arch `json:"arch,omitempty"`
	Policy    string    `json:"policy"`    // absolute path of the policy file; "": the default policy
	Workspace string    `json:"workspace"` // absolute host directory shared as /workspace
	Env       []string  `json:"env"`       // K=V for every command, under each exec's --env
	Secrets   []string  `json:"secrets"`   // --secret NAME[@HOST,…] flags; the real values are never here
	CPUs      int       `json:"cpus"`
	MemoryMiB int       `json:"memory_mib"`
	DiskGiB   int       `json:"disk_gib"` // the writable disk's cap
	// Ports are the published ports, as published (--publish, capsem
	// port add): HOSTIP:HOSTPORT:GUESTPORT/tcp, a host port 0 taking a
	// free one at each start. None: nothing is published.
	Ports []string `json:"ports,omitempty"`
}

// GuestArch is the sandbox's architecture: Arch, amd64 for "".
func (s Settings) GuestArch() arch.Arch { return arch.Recorded(s.Arch) }

// SettingsPorts is the settings' published ports as API Ports (with the
// host port as published: 0 for a free one); a spec that does not parse
// is shown as written.
func SettingsPorts(s Settings) []api.Port {
	var out []api.Port
	for _, p := range s.Ports {
		sp, err := ports.ParseSpec(p)
		if err != nil {
			out = append(out, api.Port{Spec: p, Published: p})
			continue
		}
		out = append(out, api.PortOf(sp, sp))
	}
	return out
}

// ReadSettings reads settings.json; a sandbox without one is told how to
// create it.
func (d Dir) ReadSettings() (Settings, error) {
	var s Settings
	b, err := os.ReadFile(d.SettingsPath())
	if errors.Is(err, fs.ErrNotExist) {
		return s, fmt.Errorf("no sandbox %q in %s: capsem start %s creates it", d.Name, filepath.Dir(d.Dir), d.Name)
	}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w (remove the sandbox with capsem rm %s)", d.SettingsPath(), err, d.Name)
	}
	return s, nil
}

// WriteSettings replaces settings.json at once (WriteFileAtomic).
func (d Dir) WriteSettings(s Settings) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(d.SettingsPath(), append(b, '\n'), 0o600)
}
