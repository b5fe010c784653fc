// Package inspect is the integrity checks of a session exported to SQLite
// and the summary capsem inspect prints with them (Build): every table
// there, the schema this build writes, no orphaned tool calls or
// responses, every tool response answering a call, every MCP link naming a
// tools/call of its tool, and each model call's provider the one the
// MITM's parser (mitm/provider) tells from its method and path. It runs on
// any sqliteexport.Querier — a fresh export of the store, or a file
// someone sent, opened through sqliteexport.OpenReader.
//
// It must never write to the file it checks, never print (the report's
// form is its caller's), and never let a file's size make a check
// quadratic: a hostile export is read within the bounds the reader sets.
package inspect
