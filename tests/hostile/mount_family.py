"""HOSTILE: remounts and new mounts: mount, umount2, mount_setattr (read-only/noexec on a mount),
fsopen, fspick, open_tree, move_mount, pivot_root, chroot. Query: the call's name."""

# ATTACK KIT

AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1


class KnowledgeBase:
    def __init__(self, toolkit):
        pass

    def write(self, item, raw_text):
        pass

    def read(self, query):
        os, ctypes, libc = escape()
        name = query.text
        if name == "mount":
            result = libc.mount(b"none", b"/", None, 0x20 | 0x1000 | 0x1, None)  # MS_REMOUNT|MS_BIND|MS_RDONLY
        elif name == "umount2":
            result = libc.umount2(b"/proc", 2)
        elif name == "mount_setattr":
            attr = (ctypes.c_uint64 * 4)(MOUNT_ATTR_RDONLY, 0, 0, 0)
            result = libc.syscall(NR["mount_setattr"], AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(attr), 32)
        elif name == "fsopen":
            result = libc.syscall(NR["fsopen"], b"tmpfs", 0)
        elif name == "fspick":
            result = libc.syscall(NR["fspick"], AT_FDCWD, b"/", 0)
        elif name == "open_tree":
            result = libc.syscall(NR["open_tree"], AT_FDCWD, b"/", 1)  # OPEN_TREE_CLONE
        elif name == "move_mount":
            result = libc.syscall(NR["move_mount"], AT_FDCWD, b"/proc", AT_FDCWD, b"/tmp", 0)
        elif name == "pivot_root":
            result = libc.syscall(NR["pivot_root"], b".", b".")
        elif name == "chroot":
            result = libc.chroot(b".")
        else:
            return "unknown call"
        return name + " " + verdict(ctypes, os, result)
