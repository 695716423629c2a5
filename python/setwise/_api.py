"""Two-party runs over TCP/TLS and their results."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Union

from . import _setwise
from ._inputs import KeySpec, to_keys
from ._setwise import InputError, Keys

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class Tls:
    """TLS 1.3 for a run (the CLI's ``--tls-*`` flags).

    The listening side needs ``cert`` and ``key``; the connecting side ``ca`` (the CA
    that signed the listener). ``ca`` on a listener makes client certificates mandatory
    (mutual TLS). ``server_name``: the name the listener's certificate must carry when
    connecting by address. ``peer_name``: refuse a peer whose certificate is not for it.
    """

    cert: PathLike | None = None
    key: PathLike | None = None
    ca: PathLike | None = None
    server_name: str | None = None
    peer_name: str | None = None


@dataclass
class Result:
    """What one party learned, and the run's report.

    Fields not produced by the operation are None. Row positions (``indices``) are
    positions in the input as given (a DataFrame's row order).
    """

    role: str
    protocol: str
    operation: str
    keys: Keys = field(repr=False)
    report: dict[str, Any] = field(repr=False)
    #: Distinct matching items (positions among the party's distinct keys).
    items: list[int] | None = None
    #: |X ∩ Y| when the party learns it.
    cardinality: int | None = None
    #: ``sum``: the sum of the sender's values over the intersection (sender only).
    sum: int | None = None
    #: ``union``: the peer's keys that are not among ours (raw item bytes).
    union_extra: list[bytes] | None = None
    #: ``shares``: this party's share of each row.
    shares: list[bytes] | None = None
    #: ``shares``, receiver: whether each share row is in the intersection.
    members: list[bool] | None = None
    #: ``shares``, sender: the distinct item behind each share row.
    share_items: list[int] | None = None
    #: ``private-id``: the ID of each distinct own item.
    ids: list[bytes] | None = None
    #: ``private-id``: the sorted IDs of X ∪ Y.
    union_ids: list[bytes] | None = None

    @property
    def indices(self) -> list[int]:
        """Input rows (ascending) whose key is in the intersection, duplicates included."""
        if self.items is None:
            raise InputError(f"{self.protocol} {self.operation}: the {self.role} learns no rows")
        return list(self.keys.rows_of(self.items))

    def rows(self, data: Any) -> Any:
        """The matching rows of ``data`` (the DataFrame or Arrow Table the keys came from)."""
        idx = self.indices
        if hasattr(data, "iloc"):
            return data.iloc[idx]
        if hasattr(data, "take"):
            return data.take(idx)
        return [data[i] for i in idx]

    @property
    def union(self) -> list[bytes]:
        """``union``: X ∪ Y as item bytes, our distinct keys first."""
        if self.union_extra is None:
            raise InputError(f"{self.protocol} {self.operation}: no union")
        return [self.keys.item(i) for i in range(len(self.keys))] + self.union_extra

    @property
    def row_ids(self) -> list[bytes | None]:
        """``private-id``: the ID of each input row (None where the key was empty)."""
        if self.ids is None:
            raise InputError(f"{self.protocol} {self.operation}: no private IDs")
        ids = self.ids
        return [None if i is None else ids[i] for i in self.keys.row_items()]

    @property
    def seconds(self) -> float:
        """The run's wall time."""
        return float(self.report.get("total_ms", 0.0)) / 1e3


def _run(
    role: str,
    items: Any,
    protocol: str,
    op: str,
    *,
    key: KeySpec,
    connect: str | None,
    listen: str | None,
    tls: Tls | None,
    insecure_no_tls: bool,
    reveal: str,
    last_move: str,
    values: Any | None,
    value_bound: int,
    connect_timeout: float,
    timeout: float,
) -> Result:
    keys = to_keys(items, key)
    t = tls or Tls()
    row_values = None if values is None else [int(v) for v in values]
    outcome, report = _setwise.run(
        role,
        keys,
        protocol,
        op,
        connect=connect,
        listen=listen,
        tls_cert=None if t.cert is None else os.fspath(t.cert),
        tls_key=None if t.key is None else os.fspath(t.key),
        tls_ca=None if t.ca is None else os.fspath(t.ca),
        tls_server_name=t.server_name,
        peer_name=t.peer_name,
        insecure_no_tls=insecure_no_tls,
        reveal=reveal,
        last_move=last_move,
        values=row_values,
        value_bound=value_bound,
        connect_timeout=connect_timeout,
        timeout=timeout,
    )
    r = Result(role=role, protocol=protocol, operation=op, keys=keys, report=json.loads(report))
    kind = outcome["kind"]
    if kind == "intersection":
        r.items = outcome["items"]
        r.cardinality = len(outcome["items"])
    elif kind == "cardinality":
        r.cardinality = outcome["cardinality"]
    elif kind == "sum":
        r.cardinality, r.sum = outcome["cardinality"], outcome["sum"]
    elif kind == "union":
        r.union_extra = outcome["extra"]
    elif kind == "shares":
        r.shares, r.share_items = outcome["shares"], outcome["items"]
        r.members = outcome["members"] or None
        if r.members is not None:
            r.cardinality = sum(r.members)
    elif kind == "private_id":
        r.ids, r.union_ids = outcome["own"], outcome["union"]
    return r


def receiver(
    items: Any,
    protocol: str = "ecdh",
    op: str = "intersection",
    *,
    key: KeySpec = None,
    connect: str | None = None,
    listen: str | None = None,
    tls: Tls | None = None,
    insecure_no_tls: bool = False,
    reveal: str = "receiver",
    last_move: str = "bloom",
    connect_timeout: float = 30.0,
    timeout: float = 600.0,
) -> Result:
    """Runs the receiver (the party that learns the result) against a sender.

    ``items``: a list of str/bytes, a pandas Series/Index, a pyarrow Array/ChunkedArray,
    or a DataFrame / Arrow Table with ``key`` (a column name or several). Exactly one of
    ``connect="host:port"`` or ``listen="host:port"``. Plain TCP only on loopback unless
    ``insecure_no_tls=True``; otherwise give ``tls``. The options mean what the CLI's
    flags of the same names mean.
    """
    return _run(
        "receiver",
        items,
        protocol,
        op,
        key=key,
        connect=connect,
        listen=listen,
        tls=tls,
        insecure_no_tls=insecure_no_tls,
        reveal=reveal,
        last_move=last_move,
        values=None,
        value_bound=2**32 - 1,
        connect_timeout=connect_timeout,
        timeout=timeout,
    )


def sender(
    items: Any,
    protocol: str = "ecdh",
    op: str = "intersection",
    *,
    key: KeySpec = None,
    connect: str | None = None,
    listen: str | None = None,
    tls: Tls | None = None,
    insecure_no_tls: bool = False,
    reveal: str = "receiver",
    last_move: str = "bloom",
    values: Any | None = None,
    value_bound: int = 2**32 - 1,
    connect_timeout: float = 30.0,
    timeout: float = 600.0,
) -> Result:
    """Runs the sender against a receiver; see :func:`receiver`.

    ``op="sum"``: ``values`` holds one non-negative integer per input row (rows with one
    key add up; no key's total may exceed ``value_bound``), and the sender learns the
    sum over the intersection. ``reveal="both"`` (both sides): the sender learns the
    intersection or its size too.
    """
    return _run(
        "sender",
        items,
        protocol,
        op,
        key=key,
        connect=connect,
        listen=listen,
        tls=tls,
        insecure_no_tls=insecure_no_tls,
        reveal=reveal,
        last_move=last_move,
        values=values,
        value_bound=value_bound,
        connect_timeout=connect_timeout,
        timeout=timeout,
    )
