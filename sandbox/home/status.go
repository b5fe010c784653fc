package home

import (
	"errors"
	"io/fs"
	"os"

	"github.com/capsem/capsem/guest/image"
	"github.com/capsem/capsem/sandbox/api"
)

// Status is the sandbox as `capsem ls` shows it, from its files.
// policySHA gives the sha256 of a policy file ("" for the default policy)
// for a sandbox that has no launch record to say which policy is in force;
// nil leaves it empty.
func (d Dir) Status(policySHA func(path string) string) (api.Status, error) {
	s, err := d.ReadSettings()
	if err != nil {
		return api.Status{}, err
	}
	st := api.Status{
		Name: d.Name, Created: s.Created, Policy: s.Policy, Workspace: s.Workspace,
		CPUs: s.CPUs, MemoryMiB: s.MemoryMiB, DiskSize: int64(s.DiskGiB) << 30, Image: s.Image, Arch: s.GuestArch().String(), Log: d.Log(),
		Socket: d.SocketPath(),
	}
	if used, size, err := image.DiskUsage(d.Disk()); err == nil {
		st.DiskUsed, st.DiskSize = used, size
	}
	launch, launched := d.ReadLaunch()
	switch {
	case d.Locked():
		st.State = api.StateRunning
	case launched:
		st.State = api.StateCrashed
		st.Crash = "its supervisor died without stopping it"
	default:
		st.State = api.StateStopped
		if _, err := d.Suspended(); !errors.Is(err, fs.ErrNotExist) {
			st.State = api.StateSuspended
		}
	}
	st.SnapshotBytes = d.SnapshotBytes()
	if g, err := d.Overlay().Grants(); err != nil {
		st.Asked = []string{"(unreadable: " + err.Error() + ")"}
	} else {
		st.Asked = g.Entries()
	}
	if b, err := os.ReadFile(d.CrashPath()); err == nil && len(b) > 0 {
		st.State, st.Crash = api.StateCrashed, string(b)
	}
	if launched {
		st.Started, st.SessionID, st.PolicySHA256 = launch.Started, launch.SessionID, launch.PolicySHA256
		if st.State == api.StateRunning {
			st.PID, st.Ports = launch.PID, launch.Ports
		}
	}
	if st.State != api.StateRunning {
		st.Ports = SettingsPorts(s)
	}
	if st.PolicySHA256 == "" && policySHA != nil {
		st.PolicySHA256 = policySHA(s.Policy)
	}
	return st, nil
}
