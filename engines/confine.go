package engines

// What an engine's image needs of the kernel, as Spec.Capabilities: the
// official images start as root, hand their data directories to the
// server's user and switch to it, and need nothing else. Every sandbox
// runs with exactly these (runtime.RunSpec.Capabilities: every other
// capability is dropped, with no-new-privileges and the runtime's default
// seccomp profile). An engine that needs more says why beside its Spec
// (postgres: FOWNER and DAC_OVERRIDE).
//
//   - CHOWN: `find … \! -user X -exec chown X` of the data directories
//     (every entrypoint so far; postgres's warm start unpacks its template
//     with `tar -p`, which keeps the owners);
//   - SETUID, SETGID: gosu, su-exec or setpriv --reuid/--regid and their
//     setgroups.
//
// Not needed, so dropped: FSETID (postgres's entrypoint's `chmod 03775
// /var/run/postgresql` then loses its setgid bit, which nothing relies
// on), KILL (the runtime stops the server from outside; the warm template
// is stopped by pg_ctl as postgres), NET_RAW, MKNOD, SETFCAP, SETPCAP,
// SYS_CHROOT, AUDIT_WRITE, NET_BIND_SERVICE (every port is above 1024).

// DropToServerUser is what an entrypoint needs to chown a fresh tmpfs to
// the server's user and become that user. It returns a new slice each
// time, for an engine to extend.
func DropToServerUser() []string { return []string{"CHOWN", "SETGID", "SETUID"} }
