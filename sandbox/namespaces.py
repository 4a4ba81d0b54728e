"""Namespaces of one candidate, inside the jail the fork server already runs in.

The fork server's child ("keeper") enters a new user, mount, PID, network, IPC and UTS namespace and
forks the candidate, which is then PID 1 of a namespace holding only itself: it cannot name the fork
server, a sibling candidate or any host process in a system call, and it dies with the keeper. In its
own mount namespace the candidate's folder is a fresh tmpfs bounded in bytes and inodes, which vanishes
with the namespace (nothing for the host to clean up, nothing an attribute can pin), and /proc shows
only itself. The capabilities the new user namespace gave are dropped before any program code runs.
"""

from __future__ import annotations

import ctypes
import os

from .libc import check, libc

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CAPABILITY_VERSION_3 = 0x20080522
CANDIDATE_NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
EVERY_NAMESPACE = CANDIDATE_NAMESPACES | CLONE_NEWCGROUP


def enter() -> None:
    """In the keeper: new namespaces for the child it forks next, the same uid and gid inside as outside."""
    uid, gid = os.getuid(), os.getgid()
    # The fork server is not dumpable, so its /proc files (uid_map among them) belong to root; this process
    # must own them to write its own maps.
    check(libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
    check(libc.unshare(CANDIDATE_NAMESPACES), "unshare(user, mount, pid, net, ipc, uts)")
    for name, text in (("uid_map", f"{uid} {uid} 1"), ("setgroups", "deny"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as file:
            file.write(text)


def mount_private(workdir: str, disk_mb: int, disk_inodes: int) -> list[str]:
    """In the candidate (PID 1 of its namespace): its own /proc and a bounded tmpfs as its folder."""
    check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount(/, private)")
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    options = f"size={disk_mb}m,nr_inodes={disk_inodes},mode=0700".encode()
    check(libc.mount(b"tmpfs", os.fsencode(workdir), b"tmpfs", flags, options), f"mount tmpfs on {workdir}")
    layers = [f"tmpfs({disk_mb} MB, {disk_inodes} inodes)"]
    # Best effort: Landlock still keeps the program to /proc/self when the kernel refuses a new procfs.
    if libc.mount(b"proc", b"/proc", b"proc", flags, None) == 0:
        layers.append("own-proc")
    return layers


def drop_capabilities() -> str:
    """Empty every capability set, the bounding and ambient sets included; returns the layer name."""
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: verified below
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    check(libc.capset(header, data), "capset")
    status = capability_sets()
    if any(status.values()):
        raise OSError(0, f"capabilities left after dropping: {status}")
    return "no-capabilities"


def capability_sets(pid: str = "self") -> dict[str, int]:
    """CapInh/CapPrm/CapEff/CapBnd/CapAmb of a process, from its /proc status."""
    sets = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("Cap"):
                key, value = line.split(":", 1)
                sets[key] = int(value, 16)
    return sets
