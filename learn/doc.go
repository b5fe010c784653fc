// Package learn turns what sessions did into policy. Record gathers the
// decisions the policy made in sessions' events (DNS answers, flows,
// decrypted requests, MCP tools/calls); Check replays them against
// another policy and lists what it would decide otherwise (allowed →
// denied and back, with the rule responsible); Suggest writes the
// smallest policy under which the sessions' allowed traffic is still
// allowed and what they were refused is still refused, every line with a
// comment saying how many events it covers. capsem policy suggest and
// capsem policy check are its commands.
//
// What it must never do:
//
//   - count as a policy decision what the policy did not decide: a flow
//     the upstream refused, a request DLP or a secret's guard blocked, a
//     query the store could not record are left out (policyReasons), so a
//     check never reports what no policy change would undo;
//   - suggest a policy that allows a name or a request the sessions were
//     refused, unless --from-denied asked for it (each such line says
//     so): a wildcard is written only where no refused name falls under
//     it;
//   - trust a session's strings: names, paths and tools come from the
//     guest; they reach the policy file through go-toml's quoting or
//     policy's own checks, never pasted as TOML.
package learn
