"""setwise: private set operations between parties who do not trust each other.

Two-party runs over TCP/TLS (:func:`receiver`, :func:`sender`), inputs from lists,
pandas or Arrow, results as :class:`Result`, and DH-PSI message by message
(:class:`EcdhReceiver`, :func:`ecdh_respond`). Errors are :class:`Error` and its
subclasses :class:`InputError`, :class:`PeerError` and :class:`NetworkError`.
"""

from __future__ import annotations

from typing import Any

from ._api import Result, Tls, receiver, sender
from ._inputs import KeySpec, to_keys
from ._setwise import (
    EcdhReceiver,
    Error,
    InputError,
    Keys,
    NetworkError,
    PeerError,
    __version__,
    ecdh_respond,
)


def keys(items: Any, key: KeySpec = None) -> Keys:
    """A party's keys, prepared once (a run accepts them in place of ``items``)."""
    return to_keys(items, key)


__all__ = [
    "EcdhReceiver",
    "Error",
    "InputError",
    "Keys",
    "NetworkError",
    "PeerError",
    "Result",
    "Tls",
    "__version__",
    "ecdh_respond",
    "keys",
    "receiver",
    "sender",
]
