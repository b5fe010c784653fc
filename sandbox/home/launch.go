package home

// run.json, the launch record: what the running supervisor writes once its
// guest is up, rewrites when the policy is reloaded, and removes when it
// stops cleanly — so one left behind while no one holds the lock means the
// supervisor died (crashed). One JSON object on one line, 0600:
//
//	{"pid":1234,"started":"2025-01-02T03:04:05.678Z","session_id":"<id>",
//	 "policy_sha256":"<hex>","socket":"/abs/api.sock"}
//
// STABILITY: read by `capsem ls`, `capsem stop` (the pid to kill) and
// clients of every version; add fields, never rename, retype or remove one.
// The file keeps its name, run.json, whatever the type is called here.

import (
	"encoding/json"
	"os"
	"time"

	"github.com/capsem/capsem/sandbox/api"
)

// Launch is run.json: one start of a sandbox's supervisor.
type Launch struct {
	PID          int       `json:"pid"`
	Started      time.Time `json:"started"`
	SessionID    string    `json:"session_id"`
	PolicySHA256 string    `json:"policy_sha256"`
	Socket       string    `json:"socket"`
	// Ports are the published ports in force (the host ports picked for
	// 0 included), rewritten as they change.
	Ports []api.Port `json:"ports,omitempty"`
}

// ReadLaunch reads run.json; false when there is none or it cannot be
// read.
func (d Dir) ReadLaunch() (Launch, bool) {
	var l Launch
	b, err := os.ReadFile(d.LaunchPath())
	if err != nil || json.Unmarshal(b, &l) != nil {
		return l, false
	}
	return l, true
}

// WriteLaunch replaces run.json at once (WriteFileAtomic).
func (d Dir) WriteLaunch(l Launch) error {
	b, _ := json.Marshal(l)
	return WriteFileAtomic(d.LaunchPath(), b, 0o600)
}
