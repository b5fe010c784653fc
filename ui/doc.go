// Package ui is the session viewer behind `capsem ui`: web pages of what
// sandboxes did — the sessions, a session's events in order with
// filters and a text search, a per-host summary, a model call with its
// tool calls and the responses that answered them — served to a browser on
// the same machine.
//
// Pages are rendered on the server with html/template, whose contextual
// escaping is the point: nearly every string shown (names, paths,
// previews, commands) is the guest's, and must never become markup or
// script. A little plain JavaScript (static/app.js) adds what a page
// cannot do alone: scrolling on through a long session a page at a time,
// following a live one, filtering the session list as one types. The
// assets are embedded (go:embed): no CDN, no Node build.
//
// Sessions come from a Source — the event store, read a page at a time, so
// that a session of a million events opens as fast as a small one.
//
// The questions page (asks.go) is the one that acts: it lists what running
// sandboxes ask ([network] unknown = "ask", through Asks, which capsem ui
// feeds by following every running sandbox's questions) and its buttons
// answer them.
//
// What it must never do: write to a Source; take an answer from anything
// but a form of its own page (Sec-Fetch-Site, else Origin: asks.go);
// answer a request without the
// access token in its path, or for a Host that is not a loopback address
// or localhost (another local user, or a web page the user visits through
// DNS rebinding, must not read sessions); render guest text other than
// through html/template; load anything from outside its own origin
// (Content-Security-Policy says so to the browser).
package ui
