"""The HTTP session of `s3://` requests (aiobotocore's aiohttp session, given to the client
through `AioConfig(http_session_cls=...)`), changed so that the read timeout covers every
answer. Imported only for `s3://` (aiobotocore comes with s3fs)."""

from __future__ import annotations

from typing import Any

from aiobotocore.httpsession import AIOHTTPSession


class AnsweredSession(AIOHTTPSession):  # type: ignore[misc]
    """aiobotocore's session, its requests sent without `Expect: 100-continue`: aiohttp
    waits for a `100 Continue` with no timeout, so an upload to a store that stopped
    answering would wait forever; without it the body goes at once and the read timeout
    bounds the wait for the answer."""

    async def send(self, request: Any) -> Any:
        """Send `request` without its `Expect` header."""
        request.headers.pop("Expect", None)
        return await super().send(request)
