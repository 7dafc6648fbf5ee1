"""Hosts on one machine: network namespaces joined by a Linux bridge.

Every name this module creates starts with :data:`PREFIX` (namespaces ``ph-<host>``, host-side
veth ends ``phv-<host>``) or is :data:`BRIDGE`, so :func:`remove_leftovers` can clear what a
crashed earlier run left behind without touching anything else. Inside each namespace the
veth end is ``eth0`` with the host's address on :data:`SUBNET`, and ``lo`` is up; the root
namespace holds the bridge's own address (:data:`ROOT_ADDRESS`), from which the orchestrator
reaches every host.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

PREFIX = "ph-"
VETH_PREFIX = "phv-"
BRIDGE = "prbr0"
SUBNET = "10.231.0"
ROOT_ADDRESS = f"{SUBNET}.1"


@dataclass(frozen=True, slots=True)
class Host:
    """One namespace: ``name`` (e.g. ``api1``), its address and any extra addresses."""

    name: str
    address: str
    extra: tuple[str, ...] = ()

    @property
    def netns(self) -> str:
        return f"{PREFIX}{self.name}"

    @property
    def veth(self) -> str:
        """The host-side end of the namespace's link (on the bridge)."""
        return f"{VETH_PREFIX}{self.name}"

    def exec(self, *cmd: str) -> list[str]:
        """``cmd`` prefixed to run inside this host's namespace."""
        return ["ip", "netns", "exec", self.netns, *cmd]


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``ip ARGS``; raise with its stderr if it fails and ``check``."""
    result = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {result.stderr.strip()}")
    return result


def create(hosts: Sequence[Host]) -> None:
    """The bridge with :data:`ROOT_ADDRESS`, and one namespace per host linked to it."""
    ip("link", "add", BRIDGE, "type", "bridge")
    ip("addr", "add", f"{ROOT_ADDRESS}/24", "dev", BRIDGE)
    ip("link", "set", BRIDGE, "up")
    for host in hosts:
        ip("netns", "add", host.netns)
        ip("link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
        ip("link", "set", host.veth, "master", BRIDGE, "up")
        for address in (host.address, *host.extra):
            ip("-n", host.netns, "addr", "add", f"{address}/24", "dev", "eth0")
        ip("-n", host.netns, "link", "set", "eth0", "up")
        ip("-n", host.netns, "link", "set", "lo", "up")


def set_link(host: Host, up: bool) -> None:
    """Put the host's link on the bridge up or down (down: the host is cut off)."""
    ip("link", "set", host.veth, "up" if up else "down")


def namespace_pids(netns: str) -> list[int]:
    """Processes running in ``netns`` (empty if it does not exist)."""
    result = ip("netns", "pids", netns, check=False)
    return [int(pid) for pid in result.stdout.split() if pid.isdigit()]


def kill_namespace(netns: str, sig: signal.Signals = signal.SIGKILL) -> list[int]:
    """Send ``sig`` to every process in ``netns``; return their pids."""
    pids = namespace_pids(netns)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    return pids


def remove_leftovers() -> list[str]:
    """Kill the processes in, and delete, every ``ph-*`` namespace, every ``phv-*`` link and
    the bridge; return what was removed. Safe to call when nothing exists."""
    removed: list[str] = []
    namespaces = [
        line.split()[0]
        for line in ip("netns", "list", check=False).stdout.splitlines()
        if line.startswith(PREFIX)
    ]
    for netns in namespaces:
        kill_namespace(netns)
    if namespaces:
        _wait_until_empty(namespaces, timeout_s=10)
    for netns in namespaces:
        ip("netns", "del", netns, check=False)
        removed.append(netns)
    for line in ip("-o", "link", "show", check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(VETH_PREFIX) or name == BRIDGE:
            ip("link", "del", name, check=False)
            removed.append(name)
    return removed


def _wait_until_empty(namespaces: Sequence[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(namespace_pids(netns) for netns in namespaces):
            return
        time.sleep(0.1)
