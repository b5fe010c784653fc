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
package main
