"""The bridge sandboxes use while setup may reach the network, and its firewall."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import docker
import docker.errors

from loopwright.sandbox.base import SandboxError
from loopwright.sandbox.docker.engine import ENGINE_FAILURES, NETWORK_NAME, engine_error


def sandbox_network(client: docker.DockerClient) -> Any:
    """The bridge sandboxes use while they may reach the network; ICC off, so not each other.

    Its firewall (see `ensure_setup_firewall`) is checked and completed every time.
    """
    try:
        network = the_network(client)
        if network is None:
            failure: docker.errors.APIError | None = None
            try:
                client.networks.create(
                    NETWORK_NAME,
                    driver="bridge",
                    options={"com.docker.network.bridge.enable_icc": "false"},
                    labels={"loopwright.network": "sandbox"},
                    check_duplicate=True,
                )
            except docker.errors.APIError as exc:
                failure = exc  # fine if another process created it between lookup and create
            network = the_network(client)
            if network is None:
                raise SandboxError(
                    f"could not create the Docker network {NETWORK_NAME}: {failure}"
                ) from failure
    except ENGINE_FAILURES as exc:
        raise engine_error(exc) from exc
    problem = network_problem(network.attrs)
    if problem is not None:
        raise SandboxError(
            f"the Docker network {NETWORK_NAME} exists but is not the one Loopwright makes "
            f"({problem}), so sandboxes on it could reach each other or be joined by others; "
            f"remove it (`docker network rm {NETWORK_NAME}` once no container uses it) and "
            "Loopwright creates it again"
        )
    ensure_setup_firewall(network.attrs)
    return network


def network_problem(attrs: Mapping[str, Any]) -> str | None:
    """Why a network of the sandbox network's name is not one Loopwright made, or None.

    A network of that name left by something else (an older setup, another tool on the
    engine) may let containers talk to each other; sandboxes are never put on it.
    """
    if attrs.get("Driver") != "bridge":
        return f"its driver is {attrs.get('Driver')!r}, not 'bridge'"
    if (attrs.get("Labels") or {}).get("loopwright.network") != "sandbox":
        return "it lacks the label loopwright.network=sandbox"
    options = attrs.get("Options") or {}
    if options.get("com.docker.network.bridge.enable_icc") != "false":
        return "traffic between its containers is not turned off (enable_icc)"
    return None


def the_network(client: docker.DockerClient) -> Any:
    """The one network named `NETWORK_NAME`, or None.

    The engine's duplicate check is best effort: processes that create the network at the
    same moment can leave several of that name, and a lookup by name then fails. Every
    process keeps the same one (the oldest) and removes the others that nothing uses.
    """
    # The engine's name filter matches parts of names; keep the exact ones.
    found = [n for n in client.networks.list(names=[NETWORK_NAME]) if n.name == NETWORK_NAME]
    if not found:
        return None
    found.sort(key=lambda n: (_created(n.attrs), str(n.id)))
    for extra in found[1:]:
        try:
            extra.remove()
        except docker.errors.APIError:
            continue  # in use (or already gone): its sandboxes keep it until they end
    try:
        return client.networks.get(str(found[0].id))
    except docker.errors.NotFound:
        return None


def _created(attrs: Mapping[str, Any]) -> tuple[str, str]:
    """The engine's creation time as a sortable key (it trims trailing zeros off fractions)."""
    match = re.match(r"(.*?T\d\d:\d\d:\d\d)(?:\.(\d+))?", str(attrs.get("Created", "")))
    if match is None:
        return (str(attrs.get("Created", "")), "")
    return (match[1], (match[2] or "").ljust(9, "0"))


# -- the firewall ------------------------------------------------------------------------------

FIREWALL_TAG = "loopwright-sandbox"
"""The comment on every rule Loopwright installs; only rules carrying it are ever removed."""
METADATA_NET = "169.254.0.0/16"
_FIREWALL_HINT = (
    "run Loopwright as root on the Docker host (with iptables and Docker's DOCKER-USER chain), "
    "or set LOOPWRIGHT_NETWORK=none to run setup without a network"
)


def bridge_interface(attrs: Mapping[str, Any]) -> str:
    """The host interface of a Docker bridge network (Docker names it br-<id> by default)."""
    options = attrs.get("Options") or {}
    return str(options.get("com.docker.network.bridge.name") or f"br-{str(attrs['Id'])[:12]}")


def _subnets(attrs: Mapping[str, Any]) -> set[str]:
    configs = (attrs.get("IPAM") or {}).get("Config") or []
    return {str(c["Subnet"]) for c in configs if c.get("Subnet")}


def host_networks(route_table: str | None = None) -> list[str]:
    """The IPv4 networks this host routes to directly or through a gateway (not the default
    route), from /proc/net/route: the host's own local and private networks."""
    if route_table is None:
        try:
            route_table = Path("/proc/net/route").read_text()
        except OSError:
            return []
    nets: set[str] = set()
    for line in route_table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        dest, mask = int(fields[1], 16), int(fields[7], 16)
        if mask == 0:
            continue  # the default route: the internet, which setup may reach
        addr = socket.inet_ntoa(dest.to_bytes(4, "little"))
        prefix = bin(mask).count("1")
        nets.add(f"{addr}/{prefix}")
    return sorted(nets)


def nameservers(resolv_conf: str | None = None) -> list[str]:
    """The host's IPv4 resolvers (not loopback ones), which Docker's embedded DNS forwards to
    from inside each container's namespace."""
    if resolv_conf is None:
        try:
            resolv_conf = Path("/etc/resolv.conf").read_text()
        except OSError:
            return []
    found = []
    for line in resolv_conf.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver":
            try:
                socket.inet_aton(words[1])
            except OSError:
                continue  # IPv6 or malformed
            if not words[1].startswith("127.") and words[1].count(".") == 3:
                found.append(words[1])
    return found


def firewall_rules(
    interface: str, own_subnets: set[str], networks: list[str], resolvers: Sequence[str] = ()
) -> list[list[str]]:
    """`iptables` rule specs (chain first) for the setup bridge `interface`, in order.

    INPUT: nothing from the bridge reaches any address of the host (replies to connections
    the host opened excepted). Docker's embedded DNS answers inside each container's own
    namespace, so setup needs nothing on the host. DOCKER-USER (forwarded traffic): nothing
    from the bridge reaches the metadata range or the host's other networks, except DNS to
    the host's own resolvers (which may sit on one of those networks).
    """
    tag = ["-m", "comment", "--comment", FIREWALL_TAG]
    rules = [
        ["INPUT", "-i", interface, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED",
         *tag, "-j", "ACCEPT"],
        ["INPUT", "-i", interface, *tag, "-j", "DROP"],
    ]  # fmt: skip
    for resolver in resolvers:
        for proto in ("udp", "tcp"):
            rules.append(
                ["DOCKER-USER", "-i", interface, "-d", f"{resolver}/32", "-p", proto,
                 "--dport", "53", *tag, "-j", "ACCEPT"]
            )  # fmt: skip
    for net in [METADATA_NET, *networks]:
        if net not in own_subnets:
            rules.append(["DOCKER-USER", "-i", interface, "-d", net, *tag, "-j", "DROP"])
    return rules


def _iptables(binary: str, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [binary, "-w", "5", *args], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(
            f"cannot install the setup network's firewall ({binary}: {exc}); {_FIREWALL_HINT}"
        ) from exc


def _install(binary: str, interface: str, rules: list[list[str]]) -> None:
    """Add the missing `rules` (top of their chain, keeping their order) and remove rules of
    ours for other interfaces (a sandbox network that was removed and made again)."""
    chains = sorted({rule[0] for rule in rules})
    for chain in chains:
        listed = _iptables(binary, "-S", chain)
        if listed.returncode != 0:
            raise SandboxError(
                f"cannot install the setup network's firewall: `{binary} -S {chain}` failed "
                f"({listed.stderr.strip()}); {_FIREWALL_HINT}"
            )
        for line in listed.stdout.splitlines():
            words = line.split()
            if FIREWALL_TAG in words and interface not in words and words[:1] == ["-A"]:
                _iptables(binary, "-D", *words[1:])
    for chain in chains:
        position = 1
        for rule in (r for r in rules if r[0] == chain):
            if _iptables(binary, "-C", *rule).returncode != 0:
                added = _iptables(binary, "-I", chain, str(position), *rule[1:])
                if added.returncode != 0:
                    raise SandboxError(
                        f"cannot install the setup network's firewall: `{binary} -I "
                        f"{' '.join(rule)}` failed ({added.stderr.strip()}); {_FIREWALL_HINT}"
                    )
            position += 1


def ensure_setup_firewall(attrs: Mapping[str, Any]) -> list[str]:
    """Install (idempotently) the rules that keep the setup bridge off the host's own
    addresses, the metadata range and the host's other networks; return the rules as
    `iptables -S` would print them. Raises `SandboxError` saying what to do when it cannot."""
    interface = bridge_interface(attrs)
    if not Path("/sys/class/net", interface).exists():
        raise SandboxError(
            f"the setup network's bridge {interface} is not on this host (is DOCKER_HOST a "
            f"remote engine?), so Loopwright cannot firewall it; {_FIREWALL_HINT}"
        )
    binary = shutil.which("iptables") or "/usr/sbin/iptables"
    rules = firewall_rules(interface, _subnets(attrs), host_networks(), nameservers())
    _install(binary, interface, rules)
    ip6tables = shutil.which("ip6tables")
    if ip6tables and Path("/proc/net/if_inet6").exists():
        # IPv6 link-local addresses of the host are on the bridge too.
        tag = ["-m", "comment", "--comment", FIREWALL_TAG]
        _install(ip6tables, interface, [["INPUT", "-i", interface, *tag, "-j", "DROP"]])
    return ["-A " + " ".join(rule) for rule in rules]
