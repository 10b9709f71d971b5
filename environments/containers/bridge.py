"""Keep the MAC address of a local engine's bridge fixed while containers come and go.

A Linux bridge whose address nobody set takes the lowest MAC among its ports,
so it changes whenever a container's veth joins or leaves (netavark before 1.6
leaves it so; Docker pins it). The containers still hold the old gateway
address in their ARP caches: their replies to this machine go to a MAC that
no longer exists, and a connection to a desktop stalls in SYN retransmits (1,
3, 7, 15 s ...) until the cache expires. A pool that swaps containers hits it
on every few resets (``bench/containers.py``'s warm-pool resets: one in eight
took 7 to 25 s before this).

An address set explicitly is one the kernel keeps (``addr_assign_type`` 3):
:func:`pin_bridge_of` sets the bridge's current MAC as its own, once per
bridge (the engine deletes the bridge with its last container; the next one
is pinned again). It needs CAP_NET_ADMIN where the bridge lives: a rootless
engine's bridge is inside its own network namespace, and there it is left as
it is (a debug line says so).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

SYSFS = Path("/sys/class/net")
#: ``addr_assign_type`` of an address set by hand (NET_ADDR_SET): the bridge code leaves it alone
ADDR_SET = 3


def interface_with_address(address: str) -> str | None:
    """The name of this namespace's interface that holds IPv4 ``address`` (None: none does, or no ``ip``)."""
    ip = shutil.which("ip")
    if ip is None:
        return None
    done = subprocess.run([ip, "-j", "-4", "addr", "show"], capture_output=True, text=True, timeout=10)
    if done.returncode != 0:
        return None
    for link in json.loads(done.stdout or "[]"):
        if any(a.get("local") == address for a in link.get("addr_info", [])):
            return str(link["ifname"])
    return None


def is_pinned(interface: str) -> bool:
    return (SYSFS / interface / "addr_assign_type").read_text().strip() == str(ADDR_SET)


def pin_bridge_of(gateway: str) -> str | None:
    """Pin the MAC of the bridge whose address is ``gateway`` (a container's gateway); its name, or None when
    that bridge is not in this namespace, is not a bridge, or cannot be changed here."""
    interface = interface_with_address(gateway)
    if interface is None or not (SYSFS / interface / "bridge").is_dir():
        return None
    if is_pinned(interface):
        return interface
    mac = (SYSFS / interface / "address").read_text().strip()
    done = subprocess.run(["ip", "link", "set", "dev", interface, "address", mac], capture_output=True, text=True,
                          timeout=10)
    if done.returncode != 0:
        log.debug("cannot pin the bridge's MAC address", bridge=interface, error=done.stderr.strip())
        return None
    log.debug("bridge MAC address pinned", bridge=interface, mac=mac)
    return interface
