// Package guest will hold the guest side: the static PID-1 agent, the image
// build and the in-guest diagnostics.
//
// It is empty until the `capsem run` issue lands. The agent must never open
// a network path of its own: the guest's only way out is its NIC, which
// netstack terminates.
package guest
