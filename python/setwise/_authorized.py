"""Authorised PSI: a judge signs the items a client may look up, the client saves the
credentials, and a server intersects only with signed items (``protocol="authorized"``,
or ``"partial"`` where the judge sees a sample)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from . import _setwise
from ._api import PathLike, Result, ServeStats, Tls, _run, _serve
from ._inputs import KeySpec, to_keys
from ._setwise import Credentials, InputError
from ._unbalanced import _label_columns


class Judge:
    """A judge: its key pair (loaded from ``secret_key``, or created there with mode
    0600) and its allow-list ``allow`` (any ``items``, with ``key``). With
    ``client_column`` each row is allowed to the client that column names only: the
    identity in the client's certificate, so serving then needs mutual TLS.
    ``fraction``: partial mode's share of commitments opened; ``strict``: full mode
    signs nothing unless every item is allowed."""

    def __init__(
        self,
        allow: Any,
        key: KeySpec = None,
        *,
        secret_key: PathLike,
        client_column: str | None = None,
        fraction: float = 0.1,
        strict: bool = False,
    ) -> None:
        clients = None
        self.names_clients = client_column is not None
        if client_column is not None:
            if key is None:
                raise InputError("with client_column=, name the key column(s) too (key=)")
            clients = _label_columns(allow, [client_column])[0][1]
        self.native = _setwise.Judge(
            to_keys(allow, key), os.fspath(secret_key), clients, fraction, strict
        )

    @property
    def public_key(self) -> str:
        """The public key (hex) that servers check signatures with."""
        return self.native.public_key

    @property
    def fingerprint(self) -> str:
        """A short fingerprint of the public key, for logs."""
        return self.native.fingerprint

    def write_public_key(self, path: PathLike) -> None:
        """Writes the public key to ``path`` as the CLI's ``--public-key`` file."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.public_key + "\n")

    def serve(
        self,
        *,
        listen: str,
        sessions: int = 0,
        tls: Tls | None = None,
        insecure_no_tls: bool = False,
        max_concurrent: int = 8,
        max_peer_items: int | None = None,
        timeout: float = 600.0,
        session_timeout: float = 3600.0,
        grace: float = 30.0,
        hello_timeout: float = 10.0,
        max_pending: int = 64,
        max_pending_per_address: int = 8,
        log: Callable[[str], Any] | None = None,
    ) -> ServeStats:
        """Signs clients' allowed items on ``listen``; see :func:`setwise.serve`.
        ``max_peer_items`` refuses a client asking about more items (each costs the
        judge a signature). A judge with ``client_column`` needs mutual TLS
        (``tls.ca``): a client's stated ID is whatever it says."""
        if self.names_clients and (tls is None or tls.ca is None):
            raise InputError(
                "a judge whose allow-list names clients (client_column=) needs mutual TLS: "
                "give tls=Tls(cert=..., key=..., ca=...) so each client's identity comes "
                "from its certificate, not from what it states"
            )
        return _serve(
            "judge",
            _setwise.protocol_bringing("judge", "authorize", "judge"),
            "authorize",
            {"judge": self.native},
            log,
            listen=listen,
            sessions=sessions,
            tls=tls,
            insecure_no_tls=insecure_no_tls,
            max_concurrent=max_concurrent,
            max_peer_items=max_peer_items,
            timeout=timeout,
            session_timeout=session_timeout,
            grace=grace,
            hello_timeout=hello_timeout,
            max_pending=max_pending,
            max_pending_per_address=max_pending_per_address,
        )


def authorize(
    items: Any,
    *,
    connect: str,
    client_id: str,
    key: KeySpec = None,
    partial: bool = False,
    tls: Tls | None = None,
    insecure_no_tls: bool = False,
    connect_timeout: float = 30.0,
    timeout: float = 600.0,
) -> Result:
    """Asks the judge at ``connect`` to sign ``items`` for ``client_id``; ``partial``
    shows the judge only the sample it challenges. The result's ``credentials`` are
    what :func:`setwise.receiver` presents (``credentials.save(path)`` keeps them);
    ``refused`` / ``refused_rows`` name what the judge would not sign. Raises
    :class:`PeerError` if the judge refused every item."""
    r = _run(
        "receiver",
        "partial" if partial else "authorized",
        "authorize",
        {"keys": to_keys(items, key)},
        connect=connect,
        tls=tls,
        insecure_no_tls=insecure_no_tls,
        client_id=client_id,
        connect_timeout=connect_timeout,
        timeout=timeout,
    )
    if r.credentials is not None and len(r.credentials) == 0 and len(r.keys) > 0:
        raise _setwise.PeerError("the judge refused every item")
    return r


__all__ = ["Credentials", "Judge", "authorize"]
