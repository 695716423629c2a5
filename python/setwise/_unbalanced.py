"""Unbalanced PSI's sender database: built from a DataFrame (or any keys), saved,
loaded, updated in place, and served to many receivers."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

from . import _setwise
from ._api import PathLike, ServeStats, Tls, _path, _serve
from ._inputs import KeySpec, to_keys
from ._setwise import InputError

LabelSpec = Sequence[str] | str | None


def _text(v: Any) -> str | None:
    """A label value as text (None: empty), as a CSV file would hold it."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "replace")
    return str(v)


def _label_columns(data: Any, names: Sequence[str]) -> list[tuple[str, list[str | None]]]:
    """Each named column of ``data`` (a DataFrame or Arrow Table) as a list of text."""
    columns = []
    for name in names:
        if hasattr(data, "column_names"):  # Arrow
            if name not in data.column_names:
                raise InputError(
                    f"no label column {name!r} (the columns are: {', '.join(data.column_names)})"
                )
            values = data.column(name).to_pylist()
        elif hasattr(data, "columns"):
            if name not in data.columns:
                have = ", ".join(map(str, data.columns))
                raise InputError(f"no label column {name!r} (the columns are: {have})")
            values = data[name].tolist()
        else:
            raise InputError("labels= names columns of a DataFrame or Arrow Table")
        columns.append((name, [_text(v) for v in values]))
    return columns


def _names(labels: LabelSpec) -> list[str]:
    return [labels] if isinstance(labels, str) else list(labels or [])


class SenderDb:
    """The unbalanced sender's preprocessed database (``setwise db`` on the CLI).

    Build it once from the sender's (large) set, with label columns returned to the
    receiver with each match; save it as a directory, load it back, insert and remove
    rows in place, and serve queries with :meth:`serve` or :func:`setwise.sender`.
    """

    def __init__(self, native: _setwise.SenderDb) -> None:
        self.native = native

    @classmethod
    def build(
        cls,
        data: Any,
        key: KeySpec = None,
        labels: LabelSpec = None,
        *,
        params: str = "auto",
        receiver_max: int = 256,
        key_file: PathLike | None = None,
        link: str = "1000",
        out: PathLike | None = None,
        resume: bool = False,
    ) -> SenderDb:
        """Builds a database from ``data`` (any ``items`` of :func:`setwise.receiver`)
        with ``key``; ``labels`` names the columns each match returns (a key's first
        row gives its label). ``params``: ``auto`` (chosen for this machine, its speed
        and the memory it has for serving the database), a preset
        name such as ``1M-256``, or an APSI-style JSON file; ``receiver_max``: the most
        items a query may hold; ``link``: the link queries cross, which ``auto``
        charges their bytes at (``lan``, ``wan`` = 50 Mbit/s, or Mbit/s: a slow link
        makes it send fewer bytes for more sender work). With ``key_file`` the OPRF key
        is kept in that file (0600) and not in the database directory.

        With ``out``, the database is built into that directory as ``setwise db build``
        does: each bundle written as soon as it is computed, with a journal, so a build
        that is killed continues with ``resume=True`` and the same data (on the
        parameters it started with), computing only what is missing. The database
        returned is then the saved one: :meth:`load` it to serve it."""
        names = _names(labels)
        columns = _label_columns(data, names) if names else []
        native = _setwise.SenderDb.build(
            to_keys(data, key),
            columns,
            params,
            receiver_max,
            _path(key_file),
            link,
            _path(out),
            resume,
        )
        return cls(native)

    @classmethod
    def load(
        cls,
        path: PathLike,
        key_file: PathLike | None = None,
        *,
        compact: bool = False,
        memory: int | None = None,
    ) -> SenderDb:
        """Loads a saved database (checked: checksum, counts, every bin) to serve it.
        Its plaintexts are held in memory up to ``memory`` bytes (default: the memory
        available less an eighth), the rest read per query from an encoded copy the
        load writes beside the segments; ``compact`` keeps only coefficients in memory
        and encodes per query."""
        return cls(_setwise.SenderDb.load(os.fspath(path), _path(key_file), compact, memory))

    def save(self, path: PathLike) -> None:
        """Saves as the directory ``path`` (0700): changed bundles, then the manifest
        atomically."""
        self.native.save(os.fspath(path))

    def insert(self, data: Any, key: KeySpec = None, labels: LabelSpec = None) -> dict[str, int]:
        """Adds rows (or relabels existing keys) in place; only changed bundles are
        recomputed. A labelled database takes its label columns from ``data`` by name
        unless ``labels`` names others. Returns what changed."""
        names = _names(labels) or self.label_columns
        columns = _label_columns(data, names) if names else []
        stats: dict[str, int] = json.loads(self.native.insert(to_keys(data, key), columns))
        return stats

    def remove(self, data: Any, key: KeySpec = None) -> dict[str, int]:
        """Removes the keys of ``data``; returns what changed."""
        stats: dict[str, int] = json.loads(self.native.remove(to_keys(data, key)))
        return stats

    def keep_key_apart(self, key_file: PathLike) -> None:
        """Moves the OPRF key to ``key_file`` (0600); loading then needs it."""
        self.native.keep_key_apart(os.fspath(key_file))

    @property
    def info(self) -> dict[str, Any]:
        """Sizes, parameters (``fingerprint``), memory and label layout."""
        info: dict[str, Any] = json.loads(self.native.info())
        return info

    @property
    def fingerprint(self) -> str:
        """The parameters' fingerprint (a receiver may insist on it)."""
        return str(self.info["fingerprint"])

    @property
    def label_columns(self) -> list[str]:
        """The label columns each match returns (empty: unlabelled)."""
        return list(self.info["label_columns"])

    def __len__(self) -> int:
        return len(self.native)

    def serve(
        self,
        *,
        listen: str,
        sessions: int = 0,
        tls: Tls | None = None,
        insecure_no_tls: bool = False,
        reveal: str = "receiver",
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
        """Answers receivers' queries on ``listen``; see :func:`setwise.serve`
        (``max_peer_items`` refuses a receiver announcing more items). The
        database may be updated (:meth:`insert`, :meth:`remove`, :meth:`save`) from
        another thread while it is served: an update waits for the queries under way,
        and queries arriving meanwhile wait for the update."""
        return _serve(
            "sender",
            _setwise.protocol_bringing("database", "intersection", "sender"),
            "intersection",
            {"db": self.native},
            log,
            listen=listen,
            sessions=sessions,
            tls=tls,
            insecure_no_tls=insecure_no_tls,
            reveal=reveal,
            max_concurrent=max_concurrent,
            max_peer_items=max_peer_items,
            timeout=timeout,
            session_timeout=session_timeout,
            grace=grace,
            hello_timeout=hello_timeout,
            max_pending=max_pending,
            max_pending_per_address=max_pending_per_address,
        )
