// Package sandbox assembles one running guest: the VM (QEMU on Linux, vz on
// macOS), the network filter its only NIC ends in (package filter: the
// gVisor netstack, the MITM behind it and the MCP gateway), and the
// control connection to the guest's agent, with the record of what the
// agent reports. `capsem run`, `capsem doctor` and the
// supervisor of a long-lived sandbox all start guests through it. A
// long-lived sandbox's guest also has a writable disk (Config.DataDisk)
// and a transfer disk that PutFile and GetFile pass files through
// (transfer.go).
//
// Every command it starts gets the same defaults (execenv.go: TERM, LANG),
// whoever asked for it — capsem run, capsem exec, the API. Every write to
// the agent has a deadline; a guest that does not drain its control
// channel is cut off and stopped, and Responsive and Shutdown never wait
// on an agent that does not answer a ping within probeTimeout.
//
// A guest can be saved and started again from what was saved
// (snapshot.go): Save freezes the agent (the workspace unmounted, its
// output held), pauses the VM and writes its device state, the RAM it
// touched and its data disk; Config.Restore starts a guest from such a
// directory, speaking to its agent without a handshake (it reseeds its
// kernel's generator and sets its clock). A boot snapshot (bootsnap.go) is
// a guest saved right after boot, before any workspace was mounted or
// command ran: run, doctor and a new sandbox restore it instead of booting
// the kernel. A save never holds a real secret value (the guest has none),
// and a restore is refused, before the VM reads a byte, into another
// machine than the one that saved it.
//
// The policy a guest runs under is loaded here for every caller
// (policyfile.go): the default policy for none, the secrets of --secret
// flags bound to their real values, and the NAME=placeholder entries a
// guest command gets (SecretEnv); what the user got wrong in them is a
// ConfigError.
//
// It knows nothing of names, directories or the command line: the caller
// says where the console log, the data disk and the events go. It must
// never let the guest out by any way but the netstack, never trust what the
// agent says about commands the host did not start (exec records are built
// from what the host sent and saw), and never leave a VM behind: every
// error path and Shutdown stop the VM, the netstack and the MITM.
package sandbox
