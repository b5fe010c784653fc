// Package api is the HTTP/1.1 + JSON API a long-lived sandbox's supervisor
// serves on its unix socket, and the Go client of it: the paths, the JSON
// bodies, the frames of a streamed exec (frame.go), the handler that serves
// them over a Backend, and the Client the CLI uses. docs/API.md documents
// it for other clients (curl, the Python client in sdk/python); the names
// here are that document's, and a change to them is a change to the API.
//
// The Client never sends a byte to a socket served by a process of
// another user (peer.go: SO_PEERCRED, LOCAL_PEERCRED on macOS): the
// socket's path may lie in a directory others can write to.
//
// It must never serve anything but the Backend's sandbox, never let a
// request outlive its connection (a client gone kills its command), and
// never buffer a stream whole: output, files and events are streamed, so
// that a GiB-sized file or an endless log holds a bounded amount of memory.
package api
