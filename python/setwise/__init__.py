"""setwise: private set operations between parties who do not trust each other.

Two-party runs over TCP/TLS (:func:`receiver`, :func:`sender`, and :func:`serve` for
many receivers), inputs from lists, pandas or Arrow, results as :class:`Result`;
unbalanced PSI's :class:`SenderDb`; authorised PSI's :class:`Judge`, :func:`authorize`
and :class:`Credentials`; DH-PSI message by message (:class:`EcdhReceiver`,
:func:`ecdh_respond`). Errors are :class:`Error` and its subclasses
:class:`InputError`, :class:`PeerError` and :class:`NetworkError`.
"""

from __future__ import annotations

from typing import Any

from ._api import Result, ServeStats, Tls, receiver, sender, serve
from ._authorized import Judge, authorize
from ._inputs import KeySpec, to_keys
from ._setwise import (
    Credentials,
    EcdhReceiver,
    Error,
    InputError,
    Keys,
    NetworkError,
    PeerError,
    __version__,
    ecdh_respond,
)
from ._unbalanced import SenderDb


def keys(items: Any, key: KeySpec = None) -> Keys:
    """A party's keys, prepared once (a run accepts them in place of ``items``)."""
    return to_keys(items, key)


__all__ = [
    "Credentials",
    "EcdhReceiver",
    "Error",
    "InputError",
    "Judge",
    "Keys",
    "NetworkError",
    "PeerError",
    "Result",
    "SenderDb",
    "ServeStats",
    "Tls",
    "__version__",
    "authorize",
    "ecdh_respond",
    "keys",
    "receiver",
    "sender",
    "serve",
]
