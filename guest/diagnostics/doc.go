// Package diagnostics holds capsem-doctor, the pytest suite run inside the guest by `capsem doctor`.
//
// The suite is the sandbox's smoke-test gate, written adversarially: it
// tests what must be blocked (writes reaching the image, module loading,
// /dev/mem, debugfs, direct IPs, other ports, outside resolvers, DNS over
// TLS, stray UDP, ICMP, IPv6, denied requests) as much as what must work
// (the tools, the runtimes, the agent CLIs, HTTPS through capsem's MITM,
// the shared workspace). `capsem doctor` copies these files into the
// guest's workspace at /workspace/.capsem-doctor/ and runs
// `python3 -m pytest -p no:cacheprovider /workspace/.capsem-doctor` there.
//
// The host's side of the contract reaches the tests as environment
// variables (conftest.py's doctor_host and denied_name fixtures; never
// hard-code these names): CAPSEM_DOCTOR=1, CAPSEM_DOCTOR_HOST (an allowed
// name served by a local HTTPS upstream with /hello, /bytes?n=N, /admin/*
// refused by an [[http]] rule, /fs-events, /events?kind=K,
// /workspace-file?path=REL, /workspace-stat?path=REL, /upgrade, and an MCP
// server at /mcp (event-stream answers) and /mcp-json (JSON answers)),
// CAPSEM_DOCTOR_DENIED (a name the policy does not allow),
// CAPSEM_DOCTOR_WILD and CAPSEM_DOCTOR_WILD_CAP (a wildcard zone and its
// per-session name cap), and for test_mcp.py CAPSEM_DOCTOR_MCP_* (the
// gateway servers' names, the mark one of them has in its env, the
// variable only capsem's process has, the remote paths, and the rule each
// refusal must name). The host also writes /workspace/host-file.txt
// before boot. hostile_agent.py is a helper module, not tests: what guest
// root can do to the control channel (test_injection.py; the host's own
// tests run it as a script).
//
// How to add a test: put a test_*.py function in the file of its category
// (or a new test_*.py here: the directory is flat and every *.py is
// embedded). Test one thing and name the test for what it proves
// (test_http_port_80_is_blocked). Run commands with conftest's run(cmd,
// timeout=10), which returns a CompletedProcess with text output; write
// scratch files under the out_dir fixture (a fresh directory in /tmp) or,
// for workspace tests, under the ws_dir fixture. Only pytest and the
// standard library are available in the guest (no pytest-timeout): give
// every subprocess and socket a timeout, avoid sleeps, and keep each test
// well under a few seconds under TCG. A sandbox or network test must never
// skip inside a capsem guest: if the host's contract is missing, fail.
// Try a change with `capsem doctor -k NAME`: the suite is copied in at
// each run, so no image rebuild is needed.
//
// This package must never hold anything but the suite: no Go logic, no
// host-side code (that is cmd/capsem's doctor).
package diagnostics

import "embed"

// Files is the suite: conftest.py and the test_*.py files.
//
//go:embed *.py
var Files embed.FS
