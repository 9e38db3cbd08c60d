"""Requests through an HTTP(S) proxy (`HTTP_PROXY`/`HTTPS_PROXY`), over aiohttp: the one thing the direct client
(`http1`) does not do. Imported only when `openai_backend.env_proxy` names a proxy, so a direct run never loads
aiohttp. It answers with `http1`'s `Response` and raises `http1`'s failures, so the backend treats both alike."""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Callable, Mapping

import aiohttp

from .bounded_body import ACCEPT_ENCODING, read_bounded
from .http1 import ConnectError, ConnectTimeout, Headers, Response, TransportError


def connect_reason(exc: aiohttp.ClientConnectorError) -> str:
    """Why a connection failed, in words: the host name that does not resolve, or the OS's reason."""
    where = f"{exc.host}:{exc.port}"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"the TLS certificate of {where} was refused ({exc.certificate_error})"
    error = exc.os_error
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"the host name {exc.host} does not resolve ({error.strerror or error})"
    reason = os.strerror(error.errno) if isinstance(error.errno, int) and error.errno > 0 else str(error)
    return f"{where}: {reason.lower()}" + (" (is the server running?)" if error.errno == errno.ECONNREFUSED else "")


class ProxiedClient:
    """One aiohttp session (of one event loop) posting to `url` through `proxy`, with a pool of `max_idle`
    connections; the same `request`/`aclose` as `http1.Client`."""

    def __init__(self, url: str, proxy: str | None, headers: Mapping[str, str], *, connect_timeout_s: float,
                 max_idle: int, limit: int, where: str) -> None:
        self.url, self.proxy, self.limit, self.where = url, proxy, limit, where
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=max_idle),
            headers={"Accept-Encoding": ACCEPT_ENCODING, **headers},
            auto_decompress=False,  # bounded_body inflates with a ceiling; aiohttp would not
        )
        # aiohttp bounds only connecting; the first-byte and total limits are `timeouts.within`'s
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout_s, sock_read=None)

    async def request(self, method: str, target: str, body: bytes = b"",
                      heard: Callable[[], None] | None = None) -> Response:
        """`target` is ignored: this client posts to its one URL."""
        try:
            async with self._session.request(method, self.url, data=body, proxy=self.proxy, allow_redirects=False,
                                             timeout=self._timeout) as response:
                if heard is not None:
                    heard()
                raw = await read_bounded(response.content, response.headers, self.limit, self.where)
                fields = {k.lower(): v for k, v in response.headers.items()}
                return Response(response.status, Headers(fields), raw)
        except aiohttp.ConnectionTimeoutError as exc:
            raise ConnectTimeout(str(exc)) from None
        except aiohttp.ClientConnectorError as exc:  # its text names aiohttp's internals (`ssl:default`)
            raise ConnectError(connect_reason(exc)) from None
        except (aiohttp.ClientError, asyncio.IncompleteReadError) as exc:  # dropped, truncated, bad framing
            raise TransportError(repr(exc)) from exc

    async def aclose(self) -> None:
        await self._session.close()
