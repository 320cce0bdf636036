"""The HTTP session of `s3://` requests (aiobotocore's aiohttp session, given to the client
through `AioConfig(http_session_cls=...)`), changed so that the read timeout bounds every
wait on the store, an upload's too. Imported only for `s3://` (aiobotocore comes with
s3fs)."""

from __future__ import annotations

import functools
import inspect
import socket
from typing import Any

import aiohttp
from aiobotocore.httpsession import AIOHTTPSession

UNSENT_LIMIT: int | None = getattr(socket, "TCP_USER_TIMEOUT", None)
"""The socket option (Linux) that aborts a connection whose sent data the peer has not
taken within a time; None where there is none."""


class AnsweredSession(AIOHTTPSession):  # type: ignore[misc]
    """aiobotocore's session, its requests sent without `Expect: 100-continue` and over
    sockets that give up data the store does not take within the read timeout.

    aiohttp waits for a `100 Continue` with no timeout, and its read timeout starts once
    the body is sent: an upload to a store that stopped answering, or stopped reading,
    would wait forever. Without the header the body goes at once; the socket option ends
    a body the store stopped taking; the read timeout then bounds the answer."""

    def __init__(
        self,
        *args: Any,
        timeout: float | tuple[float, float] | None = None,
        connector_args: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        read = timeout[1] if isinstance(timeout, (tuple, list)) else timeout
        super().__init__(
            *args, timeout=timeout, connector_args=_bounded(connector_args, read), **kwargs
        )

    async def send(self, request: Any) -> Any:
        """Send `request` without its `Expect` header."""
        request.headers.pop("Expect", None)
        return await super().send(request)


def _bounded(connector_args: dict[str, Any] | None, seconds: float | None) -> dict[str, Any] | None:
    """`connector_args` with a socket factory whose sockets give up unsent data after
    `seconds`, where the system and aiohttp (3.12 and later) allow it."""
    if seconds is None or UNSENT_LIMIT is None or "socket_factory" not in _connector_options():
        return connector_args
    milliseconds = max(1, round(seconds * 1000))
    factory = functools.partial(_socket, option=UNSENT_LIMIT, milliseconds=milliseconds)
    return {**(connector_args or {}), "socket_factory": factory}


@functools.cache
def _connector_options() -> frozenset[str]:
    """The parameters aiohttp's TCPConnector takes."""
    return frozenset(inspect.signature(aiohttp.TCPConnector).parameters)


def _socket(address: tuple[Any, ...], *, option: int, milliseconds: int) -> socket.socket:
    """A socket for the address (aiohappyeyeballs' address info) that aborts once data it
    sent waits unacknowledged, or the peer's window stays shut, `milliseconds` (`option`:
    UNSENT_LIMIT)."""
    family, kind, protocol = address[:3]
    made = socket.socket(family=family, type=kind, proto=protocol)
    made.setsockopt(socket.IPPROTO_TCP, option, milliseconds)
    return made
