// Package sqliteexport writes capsem's event store (package store) to a
// SQLite database file: one row per session in `sessions`, one row per
// stored event in the table of its kind (`net_events`, `dns_events`,
// `model_calls`, `mcp_calls`, `exec_events`, `fs_events`, `agent_events`,
// `recording_events`);
// a model call's tool calls and the tool
// results its request carried go to `tool_calls` and `tool_responses`,
// linked to its `model_calls` row and sharing its seq; a tool call of an
// MCP tool is linked to the `mcp_calls` row of the MCP call that carried
// it (tool_calls.mcp_call_id, see mcplink.go). The file is
// for people (sqlite3, Datasette), for scripts, and for test fixtures; its
// schema is versioned in PRAGMA user_version (see [SchemaVersion] and
// schema.go, which documents every table and column).
//
// The export is deterministic: the same store and the same [Options] give a
// file with the same table contents. Sessions are ordered by start time,
// then id; events by session in that order, then by their store sequence
// number; integer ids are assigned in that order, and each event row keeps
// the store's sequence number in `seq`; the rows of a model call's tool calls
// and tool results follow its row, in the order the event lists them. Every
// stored event appears exactly once in the table of its kind: an event of
// a kind this build does not know goes to `other_events`.
//
// With [Options.Scrub] every text column goes through [Scrub], which
// replaces API keys, tokens, credential-bearing header values and private
// key blocks with "[REDACTED:<kind>]", so that an export can be shared or
// committed as a fixture; and the placeholders the sessions' records hold
// (store.Session.Placeholders: those a policy fixed have no prefix Scrub
// knows) become "[REDACTED:secret-placeholder]" in every session
// exported, in any case, as written or percent-encoded. The placeholders
// themselves are not exported.
//
// What this package must never do:
//   - modify the store. It only reads (Sessions, Session, Events); it can
//     export from a store opened with store.OpenReadOnly.
//   - leave a partial file at the destination. The database is built in a
//     temporary file next to it and renamed into place only once it is
//     complete and synced; on any error (or a cancelled context) the
//     temporary file is removed and the destination is untouched. An
//     existing destination is replaced only with [Options.Overwrite].
//   - let a planted secret through when scrubbing. Every text value written
//     with Scrub on — session metadata, header names and values, paths,
//     queries, body previews, reasons, details, DNS names, model output,
//     tool arguments and results, usage details, command lines (word by
//     word and across words: sessions.command, exec_events.argv and the
//     exec_events.command built from the scrubbed words), working
//     directories, file paths — passes through Scrub; there is no text
//     column that bypasses it.
//   - read a file as an export before it proved to be one. [OpenReader]
//     (capsem ui --sqlite, capsem inspect) takes a file someone may have
//     sent: it is opened read-only and immutable, refused unless its
//     sqlite_schema is exactly that of an export of this build (schema.go,
//     built once in memory and compared row by row) and PRAGMA quick_check
//     passes, and read with no row past maxRowBytes and no list past its
//     bound (open.go).
//   - import anything of capsem other than package store (imports point
//     one way: cmd → … → store).
package sqliteexport
