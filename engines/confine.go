package engines

// What each engine's image needs of the kernel, as Spec.Capabilities: the
// official images start as root, hand their data directories to the
// server's user and switch to it, and need nothing else. Every sandbox
// runs with exactly these (runtime.RunSpec.Capabilities: every other
// capability is dropped, with no-new-privileges and the runtime's default
// seccomp profile).
//
//   - CHOWN: `find … \! -user X -exec chown X` of the data directories (all
//     three entrypoints; postgres's warm start unpacks its template with
//     `tar -p`, which keeps the owners);
//   - SETUID, SETGID: gosu, su-exec or setpriv --reuid/--regid and their
//     setgroups (all three);
//   - FOWNER (postgres): root chmods directories it no longer owns once
//     they are postgres's (pgStart's chmod of the tablespace after its
//     chown: without FOWNER the cold start exits 1);
//   - DAC_OVERRIDE (postgres): root reads and writes in PGDATA, postgres's
//     and 0700: the warm template's capture (`tar -C PGDATA -cf -`, an
//     exec as root: "Cannot open: Permission denied" without it) and the
//     warm start's `tar -xp` into it.
//
// Not needed, so dropped: FSETID (the entrypoints' `chmod 03775
// /var/run/postgresql` then loses its setgid bit, which nothing relies
// on), KILL (the runtime stops the server from outside; the warm template
// is stopped by pg_ctl as postgres), NET_RAW, MKNOD,
// SETFCAP, SETPCAP, SYS_CHROOT, AUDIT_WRITE, NET_BIND_SERVICE (every port
// is above 1024).
var (
	// dropToServerUser is what an entrypoint needs to chown a fresh
	// tmpfs to the server's user and become that user.
	dropToServerUser = []string{"CHOWN", "SETGID", "SETUID"}
	// postgresCapabilities adds what root needs in postgres's own
	// directories.
	postgresCapabilities = append([]string{"DAC_OVERRIDE", "FOWNER"}, dropToServerUser...)
)
