"""What building and running our images needs from a user who is not root (rootless podman, mmdebstrap).

Both map the image's users (root, ``user`` 1000, the system accounts) onto the host through subordinate uid and
gid ranges: ``/etc/subuid`` and ``/etc/subgid`` must give the user a range of at least 65,536 ids, and
``newuidmap`` / ``newgidmap`` (package ``uidmap``) must be installed. Without them mmdebstrap stops with "unable to
pick chroot mode automatically" and podman cannot unpack an image whose files belong to other users; this module
names what is missing before either starts.
"""

from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path

#: ids a user needs: the image's files belong to uids and gids up to 65,534 (nobody)
NEEDED_IDS = 65536


def subordinate_ids(file: Path, user: str, uid: int) -> int:
    """How many subordinate ids ``file`` (``/etc/subuid`` or ``/etc/subgid``) grants the user (by name or id)."""
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError:
        return 0
    total = 0
    for line in lines:
        parts = line.strip().split(":")
        if len(parts) == 3 and parts[0] in (user, str(uid)) and parts[2].isdigit():
            total += int(parts[2])
    return total


def rootless_problem(etc: Path = Path("/etc")) -> str | None:
    """None when this process is root or may build and run images rootless; else what is missing and the fix."""
    uid = os.geteuid()
    if uid == 0:
        return None
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    missing = [f"{name} grants {user} {count} ids (needs {NEEDED_IDS})"
               for name in ("subuid", "subgid")
               if (count := subordinate_ids(etc / name, user, uid)) < NEEDED_IDS]
    missing += [f"{tool} is not installed (apt-get install uidmap)" for tool in ("newuidmap", "newgidmap")
                if shutil.which(tool) is None]
    if not missing:
        return None
    return (f"building or running container images as {user} (uid {uid}, not root) needs subordinate ids: "
            + "; ".join(missing) + f". As root: `usermod --add-subuids 100000-165535 --add-subgids 100000-165535 "
            f"{user}`, or build and run the containers as root")
