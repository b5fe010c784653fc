// Package policy is capsem's network policy: the policy file, its parser and
// the decisions made from it.
//
// A policy file is TOML:
//
//	[network]
//	default = "deny"     # optional; "deny" is the only accepted value
//	allow = ["api.anthropic.com", "*.githubusercontent.com", "pypi.org:443", "example.test:8080"]
//	deny  = ["uploads.github.com"]
//	unknown = "deny"     # or "ask": a name or port no entry names is held while a person
//	                     # is asked (capsem ask NAME); the default refuses it
//	ask_timeout = 60     # seconds a question waits for its answer, then it is refused; 0: 60
//
//	[upstream]
//	resolve = { "api.anthropic.com" = "127.0.0.1:8443" }
//	ca_files = ["extra-roots.pem"]
//	allow_private = false
//	proxy = "http://proxy.corp:3128"   # every upstream TCP connection: CONNECT through it
//	no_proxy = ["*.corp.example"]      # names that go direct
//	proxy_secret = "CORP_PROXY"        # a [[secret]] whose value is "user:password" (it needs no hosts)
//
//	[[http]]                      # request rules, first match wins
//	host = "api.github.com"       # a name or "*.name"
//	methods = ["GET", "HEAD"]     # optional: any method
//	paths = ["/repos/*"]          # optional: any path; * matches across "/"
//	action = "allow"              # or "deny"
//
//	[tls]
//	passthrough = ["*.pinned.example"]   # spliced, not decrypted
//
//	[mitm]
//	preview_bytes = 4096          # body bytes kept per request; 0: none
//
//	[dns]
//	max_wildcard_names = 4096     # distinct names "*.x" entries allow per session; 0: 4096
//
//	[[secret]]                    # the guest gets a placeholder, never the value
//	name = "ANTHROPIC_API_KEY"    # the variable the guest sees
//	from_env = "ANTHROPIC_API_KEY"   # the real value: a host variable, or from_file = "~/key.txt"
//	hosts = ["api.anthropic.com"] # the only hosts that get the real value (allowed on 443)
//	placeholder = "…"             # optional; default: a new random one each session
//	in = ["header", "query"]      # where it is replaced: header, query, path, body; this is the default
//
//	[dlp]
//	action = "log"                # or "block" or "off": credentials in decrypted requests
//	detectors = ["github-token"]  # optional: all of package dlp's
//	allow_hosts = ["*.corp.test"] # not scanned
//	expected_hosts = { "github-token" = ["github.corp.test"] }   # where a credential belongs: not a
//	                              # finding in a request's header or URL there; replaces dlp's list
//	default_expected_hosts = true # false: no detector's hosts but expected_hosts' (dlp.ExpectedHosts)
//
//	[mcp]
//	hide_denied = true            # tools/list results leave denied tools out (the default)
//	unknown = "allow"             # a tool no rule names: "allow" (the default), "deny" or "ask"
//	ask_timeout = 60              # seconds a tools/call waits for its answer; 0: 60
//
//	[[mcp.rules]]                 # MCP tools/call rules, first match wins; no match: allow
//	server = "mcp.example.com"    # a name or "*.name", or the NAME of an [mcp.servers.NAME]
//	tools = ["read_*", "search"]  # optional: every tool; * matches any run of characters
//	action = "deny"               # or "allow"
//
//	[mcp.servers.NAME]            # the guest reaches it at https://mcp.capsem.internal/NAME
//	command = ["npx", "-y", "@modelcontextprotocol/server-github"]   # run on the host
//	env = { GITHUB_TOKEN = "…" }  # with PATH and HOME, all the environment it gets
//	cwd = "~/src"                 # optional; relative is to the policy file's directory
//
//	[mcp.servers.remote]          # or a remote streamable-HTTP server
//	url = "https://mcp.example.com/mcp"   # https only
//	headers = { Authorization = "Bearer …" }
//
//	[quic]
//	mode = "intercept"            # or "block": QUIC (HTTP/3) to names allowed on 443
//
//	[[forward]]                   # a host service the guest reaches by name, and nothing else of the host
//	name = "db.capsem.internal"   # the name the guest dials: fake DNS answers it
//	port = 5432                   # the port it dials
//	to = "127.0.0.1:5432"         # exactly this: IP:port, or "unix:/path/to.sock"
//
// Parse turns the file into an immutable *Policy; its methods answer the
// questions the rest of capsem asks, per DNS query, per TCP SYN, per TLS
// ClientHello and per HTTP request:
//
//   - DecideName:  may the guest resolve this name (fake DNS answers it)?
//   - DecideFlow:  may the guest open a connection to this name on this port?
//   - Resolve:     where does capsem really connect for this name?
//   - Passthrough: is TLS to this name spliced through without decryption?
//   - DecideHTTP:  may this decrypted request (method, path) go upstream?
//   - DecideMCPTool: may this MCP tools/call reach its server?
//   - MCPServers, MCPGateway: what capsem's MCP gateway serves, and at
//     which name (mcp.capsem.internal: fake DNS answers it while a server
//     is configured, with no [network] entry).
//   - QUICMode:    is QUIC to an allowed name intercepted or refused?
//   - Forward:     is this name and port a [[forward]] to a host service?
//
// What a person allowed when asked is laid over a policy by WithGrants
// (Grants; the overlay file of a sandbox's "always" answers, overlay.go):
// allow entries after the file's, so a deny entry of the file still wins.
//
// Capsem is default-deny: a name or port that no allow entry names is refused,
// and a deny entry always wins over an allow entry. An empty policy (or
// DenyAll) refuses everything. The full grammar of entries, and the choices
// made about IP literals, wildcards and ports, are documented on Parse.
//
// What this package must never do:
//
//   - perform network I/O of any kind (no DNS lookups, no dials): it is pure
//     and decides from the file alone; resolving names and checking that a
//     resolved address is not private is the caller's job;
//   - read any file other than the policy file and its ca_files (Load reads
//     the policy file, then each ca_files entry to check that it holds PEM
//     certificates; Parse touches no file at all), or start a process (an
//     [mcp.servers.NAME] command is the gateway's to run);
//   - import any other package of capsem (imports point into policy, never
//     out of it) but dlp, for the names [dlp] detectors may list: dlp is a
//     leaf that imports nothing, and its names defined once there is what
//     keeps the file's check and the scan from drifting apart;
//   - read a secret's real value: Bind is given it (mitm.BindSecrets reads
//     the variable or file);
//   - mutate a Policy after Parse returns it: decisions are made concurrently
//     from many goroutines without locks;
//   - panic on any input: a bad policy file is an error that names the file
//     and line and says how to fix it, a bad name in a query is a denial.
package policy
