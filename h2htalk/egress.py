"""Where LLM endpoints may point: the allow-list for companion and judge base URLs.

A base URL is a server-side request: whoever saves a companion or a judge makes this server
send requests there. By default an endpoint may be a public host or loopback (local vLLM,
Ollama, llama.cpp); link-local, cloud metadata, private, carrier-grade NAT, unspecified,
multicast and reserved addresses are refused unless the setting `LLM_ALLOWED_ENDPOINTS`
lists them. Its entries (comma-separated):

    public            any globally routable address (on by default)
    loopback          127.0.0.0/8 and ::1 (on by default)
    10.0.5.0/24       an address or network (IPv4 or IPv6), allowed whatever its range
    vllm.internal     a host name (exactly), or *.corp.example (its subdomains): allowed
                      whatever it resolves to, except cloud metadata addresses, which only an
                      address or network entry allows

Leaving out `public` or `loopback` makes the list strict (only what it names).

Checked twice:
- on save (model `clean`, forms, API serializers): `validate_base_url` parses the URL (http or
  https, no user name or password, no whitespace or backslashes) and resolves the host; every
  address it resolves to must be allowed. A name that does not resolve now is accepted (the
  server may not be up yet): it is checked when connecting.
- on connect: `GuardedTransport` (the LLM client's httpx transport) resolves the host itself,
  refuses it if any address is not allowed, and connects to the checked address (pinned), so
  a name that resolves to a public address at save time and to a private one later (DNS
  rebinding) is refused. TLS still verifies the certificate for the host name. The client
  follows no redirects, and uses no proxy from the environment (a proxy would resolve the
  host itself, past this check).

Numeric host forms (2852039166, 0xA9FEA9FE, 169.254.43518) are resolved by getaddrinfo to the
address they mean (forms the client's URL parser refuses, such as 0251.0376.0251.0376, are
refused as invalid; a host that the client's parser and urllib read differently as ambiguous);
IPv4-mapped (::ffff:a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16) IPv6 addresses are
checked as the IPv4 address they carry.
"""

import contextlib
import functools
import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpcore2
import httpx2
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, ValidationError

SETTING = "LLM_ALLOWED_ENDPOINTS"
DEFAULT = ("public", "loopback")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Instance metadata services: AWS/Azure/GCP/OpenStack, AWS ECS task metadata, AWS IPv6 (Nitro),
# AWS DNS, Alibaba, Oracle. Refused even where a host-name entry would allow the host.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",
        "169.254.170.2",
        "169.254.169.253",
        "fd00:ec2::254",
        "fd00:ec2::23",
        "100.100.100.200",
        "192.0.0.192",
    )
)
METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog", "metadata"})

PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)
CGNAT = ipaddress.ip_network("100.64.0.0/10")
NAT64 = ipaddress.ip_network("64:ff9b::/96")

_HOST_NAME = re.compile(r"^(\*\.)?([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9_-]{1,63}\.?$")


class EgressError(ValueError):
    """An endpoint this server may not send requests to (the message says why)."""


@dataclass(frozen=True)
class Policy:
    entries: tuple[str, ...]
    public: bool
    loopback: bool
    names: frozenset[str]
    suffixes: tuple[str, ...]  # ".corp.example" for *.corp.example
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]

    def describe(self) -> str:
        return ", ".join(self.entries) or "(empty: nothing)"

    def names_host(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return host in self.names or any(host.endswith(s) for s in self.suffixes)

    def lists_address(self, ip: IPAddress) -> bool:
        candidates = {ip, embedded_ipv4(ip)}
        return any(
            c in net for c in candidates if c for net in self.networks if c.version == net.version
        )


@functools.lru_cache(maxsize=8)
def parse_policy(entries: tuple[str, ...]) -> Policy:
    names, suffixes, networks = set(), [], []
    for raw in entries:
        entry = raw.strip().lower()
        if entry in {"public", "loopback"}:
            continue
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            continue
        except ValueError:
            pass
        if not _HOST_NAME.match(entry):
            raise ImproperlyConfigured(
                f"{SETTING}: {raw!r} is neither 'public', 'loopback', an address, a network "
                "(CIDR) nor a host name"
            )
        if entry.startswith("*."):
            suffixes.append(entry[1:].rstrip("."))
        else:
            names.add(entry.rstrip("."))
    keywords = {e.strip().lower() for e in entries}
    return Policy(
        entries=tuple(e.strip() for e in entries),
        public="public" in keywords,
        loopback="loopback" in keywords,
        names=frozenset(names),
        suffixes=tuple(suffixes),
        networks=tuple(networks),
    )


def policy() -> Policy:
    value = getattr(settings, SETTING, DEFAULT)
    if isinstance(value, str):
        value = value.split(",")
    return parse_policy(tuple(e.strip() for e in value if e.strip()))


def embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, NAT64, 6to4), if any."""
    if ip.version == 4:
        return None
    if ip.ipv4_mapped:
        return ip.ipv4_mapped
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.sixtofour


def category(ip: IPAddress) -> str:
    """'public', 'loopback', or the kind of address refused by default."""
    ip = embedded_ipv4(ip) or ip
    if ip in METADATA_ADDRESSES:
        return "cloud metadata"
    if ip.is_loopback:
        return "loopback"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if any(ip in net for net in PRIVATE_NETWORKS if ip.version == net.version):
        return "private"
    if ip in CGNAT:
        return "carrier-grade NAT"
    if not ip.is_global or ip.is_reserved:
        return "reserved (not public)"
    return "public"


def _rule(current: Policy) -> str:
    return (
        "LLM endpoints may be public hosts or loopback; link-local, cloud metadata, private and "
        f"other non-public addresses need an entry in {SETTING} (now: {current.describe()})"
    )


def check_address(host: str, ip: IPAddress, current: Policy | None = None) -> None:
    """Raise EgressError unless `host` may be reached at `ip`."""
    current = current or policy()
    kind = category(ip)
    if current.lists_address(ip):
        return
    if (kind == "public" and current.public) or (kind == "loopback" and current.loopback):
        return
    if kind != "cloud metadata" and current.names_host(host):
        return
    shown = host if _literal(host) == ip else f"{host} resolves to {ip}, which"
    article = "an" if kind[0] in "aeiou" else "a"
    raise EgressError(f"{shown} is {article} {kind} address. {_rule(current)}.")


def split_url(url: str) -> tuple[str, int]:
    """(host, port) of an http(s) URL; EgressError for anything ambiguous."""
    if not url or any(c.isspace() or c == "\\" or ord(c) < 32 for c in url):
        raise EgressError("The URL is empty or holds whitespace, control characters or '\\'.")
    try:
        parts = urlsplit(url)
    except ValueError as error:  # "Invalid IPv6 URL"
        raise EgressError(f"The URL is not valid ({error}).") from None
    if parts.scheme.lower() not in {"http", "https"}:
        raise EgressError(f"Only http and https endpoints are allowed, not {parts.scheme!r}.")
    if "@" in parts.netloc:
        raise EgressError(
            "A user name or password in the URL is not allowed (keys go in the API key variable)."
        )
    try:
        port = parts.port
    except ValueError as error:
        raise EgressError(f"The port is not valid ({error}).") from None
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise EgressError("The URL has no host.")
    try:  # the client's own parser must see the same host; it is the one resolved
        seen = _client_host(url)
        again = _client_host(f"http://[{host}]/" if ":" in host else f"http://{host}/")
    except httpx2.InvalidURL as error:
        raise EgressError(f"The URL is not valid ({error}).") from None
    if seen != again:
        raise EgressError(f"The URL's host is ambiguous ({host!r} or {seen!r}).")
    return seen, port or (443 if parts.scheme.lower() == "https" else 80)


def _client_host(url: str) -> str:
    """The host as the LLM client connects to it (IDNA-encoded, lower case)."""
    return httpx2.URL(url).raw_host.decode("ascii").lower().rstrip(".")


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return None


def check_url(url: str, current: Policy | None = None) -> tuple[str, int]:
    """What can be checked without DNS: the URL's form, an address literal, metadata names."""
    current = current or policy()
    host, port = split_url(url)
    literal = _literal(host)
    if literal is not None:
        check_address(host, literal, current)
    elif host.lower() in METADATA_NAMES and host.lower() not in current.names:
        raise EgressError(f"{host} is a cloud metadata host. {_rule(current)}.")
    return host, port


def resolve(host: str, port: int) -> list[str]:
    """Every address the host resolves to (raises socket.gaierror / OSError)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except UnicodeError as error:  # not a valid IDNA name: no address
        raise socket.gaierror(socket.EAI_NONAME, f"not a valid host name ({error})") from None
    return list(dict.fromkeys(info[4][0] for info in infos))


def checked_addresses(host: str, port: int, current: Policy | None = None) -> list[str]:
    """Resolve the host and check every address; the addresses to connect to."""
    current = current or policy()
    if host.lower() in METADATA_NAMES and host.lower() not in current.names:
        raise EgressError(f"{host} is a cloud metadata host. {_rule(current)}.")
    addresses = resolve(host, port)
    for address in addresses:
        check_address(host, ipaddress.ip_address(address.split("%")[0]), current)
    return addresses


def check_endpoint(url: str) -> None:
    """The save-time check: the URL's form and every address its host resolves to now.

    A name that does not resolve now passes (it is checked again when connecting)."""
    current = policy()
    host, port = check_url(url, current)
    with contextlib.suppress(OSError):  # does not resolve now
        checked_addresses(host, port, current)


def validate_base_url(value: str) -> None:
    """Django validator (model clean, forms; DRF converts it) for a base URL; empty passes."""
    if not value:
        return
    try:
        check_endpoint(value)
    except EgressError as error:
        raise ValidationError(str(error), code="endpoint_not_allowed") from None


# ---------------------------------------------------------------- connecting


class GuardedBackend(httpcore2.SyncBackend):
    """Resolves and checks the host on every new connection, then connects to the checked
    address itself (no second lookup that could answer differently)."""

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        try:
            addresses = checked_addresses(host, port)
        except OSError as error:
            raise httpcore2.ConnectError(f"{host}: {error}") from error
        failure: Exception | None = None
        for address in addresses:
            try:
                return super().connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as error:
                failure = error
        raise failure or httpcore2.ConnectError(f"{host} resolves to no address")


class GuardedTransport(httpx2.HTTPTransport):
    """httpx transport whose connections go through `GuardedBackend` (no proxy)."""

    def __init__(self, **kwargs):
        kwargs["proxy"] = None
        super().__init__(**kwargs)
        if not hasattr(self._pool, "_network_backend"):  # pragma: no cover - httpx changed
            raise RuntimeError("httpx2's connection pool has no network backend to guard")
        self._pool._network_backend = GuardedBackend()
