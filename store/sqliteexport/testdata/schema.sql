CREATE TABLE sessions (
	id            TEXT PRIMARY KEY,
	started_at    TEXT NOT NULL,
	started_at_ms INTEGER NOT NULL,
	ended_at      TEXT,             -- NULL while running or when the writer crashed
	ended_at_ms   INTEGER,
	command       TEXT,             -- JSON array of the argv
	exit_code     INTEGER,          -- NULL until the session ended with a code
	policy_sha256 TEXT,
	image         TEXT,
	host          TEXT,
	events        INTEGER NOT NULL DEFAULT 0, -- stored events exported, all kinds
	allowed       INTEGER NOT NULL DEFAULT 0, -- allowed decisions: dns_events and net_events, each weighted by count
	denied        INTEGER NOT NULL DEFAULT 0, -- denied decisions, likewise
	dns           INTEGER NOT NULL DEFAULT 0, -- rows in dns_events
	net           INTEGER NOT NULL DEFAULT 0, -- rows in net_events
	model_calls   INTEGER NOT NULL DEFAULT 0, -- rows in model_calls
	input_tokens  INTEGER NOT NULL DEFAULT 0, -- sum of model_calls.input_tokens
	output_tokens INTEGER NOT NULL DEFAULT 0, -- sum of model_calls.output_tokens
	cost_usd      REAL NOT NULL DEFAULT 0,    -- sum of model_calls.estimated_cost_usd
	lost          INTEGER NOT NULL DEFAULT 0, -- events the writer could not record (store Counts.Lost), the unstored counts of recording_events included
	exec          INTEGER NOT NULL DEFAULT 0, -- rows in exec_events
	fs            INTEGER NOT NULL DEFAULT 0, -- rows in fs_events
	agent         INTEGER NOT NULL DEFAULT 0, -- rows in agent_events
	sandbox       TEXT,             -- the long-lived sandbox this session is a start of; NULL for a capsem run
	chain_seq     INTEGER,          -- hash chain: the last event the seal covers; NULL: recorded without a chain
	chain_head    TEXT,             -- sha256 of that event (hex); the session's start's when chain_seq is 0
	chain_meta    TEXT,             -- SHA-256 of the command, policy_sha256, image, host and sandbox as recorded (hex; store/chain.go)
	chain_key     TEXT,             -- the ed25519 public key that sealed it (hex); NULL: unsigned
	chain_sig     TEXT,             -- ed25519 signature of the seal message (hex; store/chain.go)
	scrubbed      INTEGER NOT NULL DEFAULT 0  -- 1: exported with --scrub, texts redacted and records left out, so rows cannot be checked against them
);
CREATE TABLE net_events (
	id                    INTEGER PRIMARY KEY,
	session_id            TEXT NOT NULL REFERENCES sessions(id),
	seq                   INTEGER NOT NULL,
	timestamp             TEXT NOT NULL,
	timestamp_ms          INTEGER NOT NULL,
	domain                TEXT,
	ip                    TEXT,
	port                  INTEGER,
	src_ip                TEXT,
	src_port              INTEGER,
	transport             TEXT,    -- tcp, udp, icmp, arp, ipv6, other
	conn_type             TEXT,    -- tcp, tls, https, http, quic
	decision              TEXT,    -- allowed, denied
	direction             TEXT NOT NULL DEFAULT 'outbound', -- inbound: a connection to a port published on the host, opened into the guest (ip and port are the guest's end, src_ip and src_port the host peer's); outbound: everything the guest opened or sent
	reason                TEXT,
	matched_rule          TEXT,
	http_version          TEXT,    -- HTTP/1.1, HTTP/2, HTTP/3 (HTTP/1.0 from a 1.0 client) for a request; NULL for a flow, and for a request recorded before capsem kept it
	method                TEXT,
	path                  TEXT,
	query                 TEXT,
	status_code           INTEGER,
	bytes_sent            INTEGER NOT NULL DEFAULT 0, -- guest to upstream
	bytes_received        INTEGER NOT NULL DEFAULT 0, -- upstream to guest
	duration_ms           REAL NOT NULL DEFAULT 0,
	request_headers       TEXT,    -- JSON [[name, value], …], canonical names, secrets hashed; as the guest sent them in order (HTTP/1.1 with Host; HTTP/2 without pseudo-headers but :protocol, cookie crumbs joined), sorted by name where capsem lost track of the connection
	response_headers      TEXT,    -- likewise: in the upstream's order on capsem's own HTTP/1.1 upstream path; sorted by name for HTTP/2 upstreams and for what Go's http.Transport reads (WebSocket upgrades, Expect: 100-continue)
	request_body_preview  TEXT,
	response_body_preview TEXT,
	count                 INTEGER NOT NULL DEFAULT 1, -- how many events this row stands for: past 50 a second of one reason, one row stands for the rest of dropped frames and refused flows, with the last one's fields
	detail                TEXT,
	prev_sha256           TEXT,    -- hash chain: SHA-256 of the stored value of the session's event before this one (hex); NULL: recorded without a chain
	sha256                TEXT,    -- SHA-256 of this event's stored value (hex): the next event's prev_sha256
	record                BLOB     -- the event as the store holds it (store/codec.go), from which this row is made; NULL in a --scrub export
);
CREATE TABLE dns_events (
	id             INTEGER PRIMARY KEY,
	session_id     TEXT NOT NULL REFERENCES sessions(id),
	seq            INTEGER NOT NULL,
	timestamp      TEXT NOT NULL,
	timestamp_ms   INTEGER NOT NULL,
	qname          TEXT,    -- the name asked, lower-cased, no trailing dot; a byte outside printable ASCII as \DDD, a backslash as \\
	qtype          TEXT,
	transport      TEXT,    -- udp, tcp
	decision       TEXT,    -- allowed, denied
	reason         TEXT,
	matched_rule   TEXT,
	answer         TEXT,    -- what the guest got: the synthetic address of an A answer, else the response code (NOERROR for an allowed name without records of the type, NXDOMAIN, SERVFAIL, REFUSED, FORMERR, NOTIMP); NULL when no reply was sent
	resolver_asked TEXT,    -- the IP the guest sent the query to
	count          INTEGER NOT NULL DEFAULT 1, -- how many queries this row stands for: past 50 a second of one reason and transport, one row stands for the rest, with the last one's name
	prev_sha256    TEXT,    -- hash chain: SHA-256 of the stored value of the session's event before this one (hex); NULL: recorded without a chain
	sha256         TEXT,    -- SHA-256 of this event's stored value (hex): the next event's prev_sha256
	record         BLOB     -- the event as the store holds it (store/codec.go), from which this row is made; NULL in a --scrub export
);
CREATE TABLE model_calls (
	id                    INTEGER PRIMARY KEY,
	session_id            TEXT NOT NULL REFERENCES sessions(id),
	seq                   INTEGER NOT NULL,
	timestamp             TEXT NOT NULL,
	timestamp_ms          INTEGER NOT NULL,
	provider              TEXT,
	domain                TEXT,    -- the API host the call was seen on (for the provider check)
	model                 TEXT,
	method                TEXT,
	path                  TEXT,
	stream                INTEGER,  -- 0 or 1
	system_prompt_preview TEXT,
	messages_count        INTEGER,
	tools_count           INTEGER,
	request_bytes         INTEGER NOT NULL DEFAULT 0,
	request_body_preview  TEXT,
	message_id            TEXT,
	status_code           INTEGER,
	text_content          TEXT,
	thinking_content      TEXT,
	stop_reason           TEXT,
	input_tokens          INTEGER NOT NULL DEFAULT 0,
	output_tokens         INTEGER NOT NULL DEFAULT 0,
	cache_read_tokens     INTEGER NOT NULL DEFAULT 0,
	cache_write_tokens    INTEGER NOT NULL DEFAULT 0,
	duration_ms           REAL NOT NULL DEFAULT 0,
	response_bytes        INTEGER NOT NULL DEFAULT 0,
	estimated_cost_usd    REAL NOT NULL DEFAULT 0,
	trace_id              TEXT,
	usage_details         TEXT,     -- JSON, as the provider reported it
	prev_sha256           TEXT,     -- hash chain: SHA-256 of the stored value of the session's event before this one (hex); NULL: recorded without a chain
	sha256                TEXT,     -- SHA-256 of this event's stored value (hex): the next event's prev_sha256
	record                BLOB      -- the event as the store holds it (store/codec.go), from which this row is made; NULL in a --scrub export
);
CREATE TABLE mcp_calls (
	id               INTEGER PRIMARY KEY,
	session_id       TEXT NOT NULL REFERENCES sessions(id),
	seq              INTEGER NOT NULL,
	timestamp        TEXT NOT NULL,
	timestamp_ms     INTEGER NOT NULL,
	server_name      TEXT,    -- the host and path posted to (mcp.example.com/mcp), or a gateway server's name
	method           TEXT,    -- initialize, tools/list, tools/call, resources/read, …
	tool_name        TEXT,
	request_id       TEXT,    -- the JSON-RPC id as sent; NULL for a notification
	request_preview  TEXT,
	response_preview TEXT,
	decision         TEXT,    -- allowed, denied
	duration_ms      REAL NOT NULL DEFAULT 0,
	error_message    TEXT,
	bytes_sent       INTEGER NOT NULL DEFAULT 0,
	bytes_received   INTEGER NOT NULL DEFAULT 0,
	reason           TEXT,
	matched_rule     TEXT,    -- the [[mcp.rules]] entry that decided
	prev_sha256      TEXT,    -- hash chain: SHA-256 of the stored value of the session's event before this one (hex); NULL: recorded without a chain
	sha256           TEXT,    -- SHA-256 of this event's stored value (hex): the next event's prev_sha256
	record           BLOB     -- the event as the store holds it (store/codec.go), from which this row is made; NULL in a --scrub export
);
CREATE TABLE tool_calls (
	id            INTEGER PRIMARY KEY,
	session_id    TEXT NOT NULL REFERENCES sessions(id),
	seq           INTEGER NOT NULL,
	timestamp     TEXT NOT NULL,
	timestamp_ms  INTEGER NOT NULL,
	model_call_id INTEGER REFERENCES model_calls(id),
	call_index    INTEGER,
	call_id       TEXT,
	tool_name     TEXT,
	arguments     TEXT,    -- JSON
	origin        TEXT,    -- native, mcp
	mcp_call_id   INTEGER REFERENCES mcp_calls(id) -- the MCP call that carried it; NULL for a native tool or when none was seen
);
CREATE TABLE tool_responses (
	id              INTEGER PRIMARY KEY,
	session_id      TEXT NOT NULL REFERENCES sessions(id),
	seq             INTEGER NOT NULL,
	timestamp       TEXT NOT NULL,
	timestamp_ms    INTEGER NOT NULL,
	model_call_id   INTEGER REFERENCES model_calls(id),
	call_id         TEXT,
	content_preview TEXT,
	is_error        INTEGER  -- 0 or 1
);
CREATE TABLE fs_events (
	id            INTEGER PRIMARY KEY,
	session_id    TEXT NOT NULL REFERENCES sessions(id),
	seq           INTEGER NOT NULL,
	timestamp     TEXT NOT NULL,
	timestamp_ms  INTEGER NOT NULL,
	action        TEXT,    -- created, modified, deleted, renamed, overflow (the guest dropped events under path), unknown (the agent sent another word)
	path          TEXT,    -- relative to the workspace, slash-separated; for renamed the new name
	size          INTEGER NOT NULL DEFAULT 0, -- bytes, as the guest reported them
	old_path      TEXT,    -- renamed: the name before
	is_dir        INTEGER, -- 0 or 1: path is a directory
	guest_time    TEXT,    -- when it happened by the guest's clock, as the guest claimed; NULL when not reported
	guest_time_ms INTEGER,
	prev_sha256   TEXT,    -- hash chain: SHA-256 of the stored value of the session's event before this one (hex); NULL: recorded without a chain
	sha256        TEXT,    -- SHA-256 of this event's stored value (hex): the next event's prev_sha256
	record        BLOB     -- the event as the store holds it (store/codec.go), from which this row is made; NULL in a --scrub export
);
CREATE TABLE exec_events (
	id            INTEGER PRIMARY KEY,
	session_id    TEXT NOT NULL REFERENCES sessions(id),
	seq           INTEGER NOT NULL,
	timestamp     TEXT NOT NULL,
	timestamp_ms  INTEGER NOT NULL,
	command       TEXT,    -- the argv as a shell shows it; NULL for the guest's interactive shell
	exit_code     INTEGER, -- the exit status, or 128+N when killed by signal N; -1 when the guest went away before saying
	duration_ms   REAL NOT NULL DEFAULT 0, -- from sending the command to seeing it end, by the host's clock
	argv          TEXT,    -- JSON array of the words
	dir           TEXT,    -- the working directory asked for; NULL: the workspace
	tty           INTEGER, -- 0 or 1: it ran on a pseudo-terminal
	pid           INTEGER, -- in the guest, as the agent reported it
	signal        TEXT,    -- the signal that killed it (KILL, TERM, …); NULL when it exited
	started_at    TEXT,    -- when the host sent the command, by the host's clock (in records made before capsem built exec events on the host, the guest's)
	started_at_ms INTEGER,
	prev_sha256   TEXT,    -- hash chain: SHA-256 of the stored value of the session's event before this one (hex); NULL: recorded without a chain
	sha256        TEXT,    -- SHA-256 of this event's stored value (hex): the next event's prev_sha256
	record        BLOB     -- the event as the store holds it (store/codec.go), from which this row is made; NULL in a --scrub export
);
CREATE TABLE agent_events (
	id           INTEGER PRIMARY KEY,
	session_id   TEXT NOT NULL REFERENCES sessions(id),
	seq          INTEGER NOT NULL,
	timestamp    TEXT NOT NULL,
	timestamp_ms INTEGER NOT NULL,
	state        TEXT,    -- silent (stopped answering pings), resumed, protocol-violation (cut off), rate-limited (guest-reported events dropped), capped (a guest-reported field truncated)
	detail       TEXT,
	count        INTEGER NOT NULL DEFAULT 1, -- rate-limited: events dropped; capped: fields truncated; otherwise 1
	prev_sha256  TEXT,    -- hash chain: SHA-256 of the stored value of the session's event before this one (hex); NULL: recorded without a chain
	sha256       TEXT,    -- SHA-256 of this event's stored value (hex): the next event's prev_sha256
	record       BLOB     -- the event as the store holds it (store/codec.go), from which this row is made; NULL in a --scrub export
);
CREATE TABLE recording_events (
	id           INTEGER PRIMARY KEY,
	session_id   TEXT NOT NULL REFERENCES sessions(id),
	seq          INTEGER NOT NULL,
	timestamp    TEXT NOT NULL,
	timestamp_ms INTEGER NOT NULL,
	state        TEXT,    -- over-budget (new flows refused), disk-low (new flows refused), resumed, unstored (count events not stored)
	detail       TEXT,    -- what happened and what to do; for unstored the span, the kinds and why
	count        INTEGER NOT NULL DEFAULT 0, -- unstored: events not stored; otherwise 0
	prev_sha256  TEXT,    -- hash chain: SHA-256 of the stored value of the session's event before this one (hex); NULL: recorded without a chain
	sha256       TEXT,    -- SHA-256 of this event's stored value (hex): the next event's prev_sha256
	record       BLOB     -- the event as the store holds it (store/codec.go), from which this row is made; NULL in a --scrub export
);
CREATE TABLE other_events (
	id           INTEGER PRIMARY KEY,
	session_id   TEXT NOT NULL REFERENCES sessions(id),
	seq          INTEGER NOT NULL,
	timestamp    TEXT NOT NULL,
	timestamp_ms INTEGER NOT NULL,
	kind         TEXT NOT NULL,
	prev_sha256  TEXT,    -- hash chain: SHA-256 of the stored value of the session's event before this one (hex); NULL: recorded without a chain
	sha256       TEXT,    -- SHA-256 of this event's stored value (hex): the next event's prev_sha256
	record       BLOB     -- the event as the store holds it (store/codec.go), from which this row is made; NULL in a --scrub export
);
CREATE UNIQUE INDEX net_events_session_seq ON net_events(session_id, seq);
CREATE INDEX net_events_session_time ON net_events(session_id, timestamp);
CREATE UNIQUE INDEX dns_events_session_seq ON dns_events(session_id, seq);
CREATE INDEX dns_events_session_time ON dns_events(session_id, timestamp);
CREATE UNIQUE INDEX model_calls_session_seq ON model_calls(session_id, seq);
CREATE INDEX model_calls_session_time ON model_calls(session_id, timestamp);
CREATE UNIQUE INDEX mcp_calls_session_seq ON mcp_calls(session_id, seq);
CREATE INDEX mcp_calls_session_time ON mcp_calls(session_id, timestamp);
CREATE UNIQUE INDEX fs_events_session_seq ON fs_events(session_id, seq);
CREATE INDEX fs_events_session_time ON fs_events(session_id, timestamp);
CREATE UNIQUE INDEX exec_events_session_seq ON exec_events(session_id, seq);
CREATE INDEX exec_events_session_time ON exec_events(session_id, timestamp);
CREATE UNIQUE INDEX agent_events_session_seq ON agent_events(session_id, seq);
CREATE INDEX agent_events_session_time ON agent_events(session_id, timestamp);
CREATE UNIQUE INDEX recording_events_session_seq ON recording_events(session_id, seq);
CREATE INDEX recording_events_session_time ON recording_events(session_id, timestamp);
CREATE UNIQUE INDEX other_events_session_seq ON other_events(session_id, seq);
CREATE INDEX other_events_session_time ON other_events(session_id, timestamp);
CREATE INDEX tool_calls_session_seq ON tool_calls(session_id, seq);
CREATE INDEX tool_calls_session_time ON tool_calls(session_id, timestamp);
CREATE INDEX tool_responses_session_seq ON tool_responses(session_id, seq);
CREATE INDEX tool_responses_session_time ON tool_responses(session_id, timestamp);
CREATE INDEX sessions_started_at ON sessions(started_at);
CREATE INDEX net_events_domain ON net_events(domain);
CREATE INDEX net_events_path ON net_events(path);
CREATE INDEX dns_events_qname ON dns_events(qname);
CREATE INDEX model_calls_trace_id ON model_calls(trace_id);
CREATE INDEX model_calls_path ON model_calls(path);
CREATE INDEX mcp_calls_server_name ON mcp_calls(server_name);
CREATE INDEX mcp_calls_tool_name ON mcp_calls(tool_name);
CREATE INDEX tool_calls_model_call_id ON tool_calls(model_call_id);
CREATE INDEX tool_calls_call_id ON tool_calls(call_id);
CREATE INDEX tool_calls_mcp_call_id ON tool_calls(mcp_call_id);
CREATE INDEX tool_responses_model_call_id ON tool_responses(model_call_id);
CREATE INDEX tool_responses_call_id ON tool_responses(call_id);
CREATE INDEX fs_events_path ON fs_events(path);
