"""Requests a browser makes on another site's behalf, refused.

The API's keys travel in the Authorization header, never in a cookie, so another site cannot
borrow them; but an API without keys (``make run``'s loopback default) would do what any page
the operator opens asks. Two checks close that:

- cross-site writes: a state-changing request that a browser marks as coming from another
  origin (``Sec-Fetch-Site``, else an ``Origin`` that is not this host) is refused. Requests
  without either header are not a browser's (curl, the clients) and pass. This is the check of
  Go's ``net/http.CrossOriginProtection``;
- DNS rebinding: while the API is open, a request must name a loopback host, or a page whose
  name was re-pointed at 127.0.0.1 could read every user's memory as its own origin (a
  same-origin GET over http carries neither Origin nor Sec-Fetch-Site: the Host alone tells).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urlsplit

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK = re.compile(r"(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{1,5})?")


def cross_site_write(method: str, headers: Mapping[str, str]) -> bool:
    """A state-changing request a browser sent for another origin."""
    if method.upper() in SAFE_METHODS:
        return False
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site not in ("same-origin", "none")  # "none": typed or bookmarked
    origin = headers.get("origin")
    if origin is None:
        return False
    try:
        return urlsplit(origin).netloc.lower() != headers.get("host", "").lower()
    except ValueError:
        return True


def loopback_host(host: str) -> bool:
    """The Host header names this machine's loopback (any port)."""
    return LOOPBACK.fullmatch(host.strip().lower()) is not None
