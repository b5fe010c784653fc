// Command capsem-net is capsem's network filter as a standalone process for
// other VMs (QEMU, libvirt, Lima, vfkit): point the VM's NIC at one of its
// sockets and the guest gets DHCP, fake DNS and only the flows the policy
// allows, with every decision in the event store.
//
//	capsem-net --policy policy.toml --data DIR --listen-qemu unix:///tmp/capsem.sock
//
// The listen flags mirror gvproxy's: --listen-qemu unix://, --listen-vfkit
// unixgram://, --listen-bess unixpacket://, plus --listen-fd N for an
// inherited socket. SIGHUP reloads the policy (a broken file keeps the old
// one); SIGINT and SIGTERM flush the events and exit 0. Bad flags or a bad
// policy exit 2.
//
// The ways in are gvproxy's too, for podman machine and crc: its
// port-forwarder API (--services, services.go) and its SSH-forwarded
// sockets (--forward-sock, sshforward.go). Both end in the netstack's one
// way in (netstack.Stack.Inbound), recorded as inbound flows.
//
// What it must never do: open a way into the guest that its user did not
// ask for (a listener only for an expose request or a --forward-sock, on
// loopback unless an address is written), or serve the services API
// anywhere but a 0600 unix socket or a loopback address.
package main
