"""Two-party runs over TCP/TLS and their results."""

from __future__ import annotations

import importlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union, cast

from . import _setwise
from ._inputs import KeySpec, arrow_frame, to_keys
from ._setwise import DEFAULT_PROTOCOL, Credentials, InputError, Keys

PathLike = Union[str, "os.PathLike[str]"]


def _pandas() -> Any:
    try:
        return importlib.import_module("pandas")
    except ImportError as e:
        raise InputError("this needs pandas (pip install pandas)") from e


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
    #: The run's report as the CLI's ``--report`` writes it: phases, sizes, parameters,
    #: the peer's identity; not what this party learned (the fields below), so that it
    #: can be handed to the partner as it is.
    report: dict[str, Any] = field(repr=False)
    #: Distinct matching items (positions among the party's distinct keys).
    items: list[int] | None = None
    #: |X ∩ Y| when the party learns it.
    cardinality: int | None = None
    #: ``sum``: the sum of the sender's values over the intersection (the sender's, or
    #: with ``sum_to="receiver"`` the receiver's only).
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
    #: ``unbalanced`` with a labelled database: the sender's label columns.
    label_columns: list[str] | None = None
    #: ``unbalanced`` with labels: each match's label values, in the order of ``items``.
    labels: list[list[str]] | None = None
    #: ``authorize``: the judge's signatures (save them, present them as ``credentials``).
    credentials: Credentials | None = None
    #: ``authorize``: the distinct items the judge refused.
    refused: list[int] | None = None

    @property
    def indices(self) -> list[int]:
        """Input rows (ascending) whose key is in the intersection, duplicates included."""
        return list(self.keys.rows_of(self._items()))

    def rows(self, data: Any) -> Any:
        """The matching rows of ``data`` (what the keys came from), as the same kind of
        frame: pandas, an Arrow Table, a Polars DataFrame, a DuckDB relation; another
        frame of the Arrow PyCapsule interface gives an Arrow Table; a list, a list. A
        DuckDB relation is read again, so its row order must be fixed (``ORDER BY``), and
        the rows come back on DuckDB's default connection; a one-shot stream (a
        RecordBatchReader) cannot be read twice: give the table instead."""
        idx = self.indices
        if hasattr(data, "iloc"):
            return data.iloc[idx]
        if hasattr(data, "take"):
            return data.take(idx)
        library = type(data).__module__.split(".")[0]
        if library == "polars" and hasattr(data, "columns"):
            return data[idx]
        table = arrow_frame(data)
        if table is None:
            return [data[i] for i in idx]
        rows = table.take(idx)
        if library == "duckdb":
            return importlib.import_module("duckdb").from_arrow(rows)
        return rows

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

    def matches(self, data: Any = None) -> Any:
        """The matches as a pandas DataFrame, with the sender's labels when it has them.

        With ``data`` (the DataFrame the keys came from): its matching rows, duplicates
        included, followed by the label columns (a label column named like one of
        ``data``'s gets the prefix ``sender.``). Without: one row per distinct match,
        its ``key`` (text) and the label columns.
        """
        pd = _pandas()
        items = self._items()
        columns = self.label_columns or []
        labels = self.labels or [[] for _ in items]
        if data is None:
            table: dict[str, list[Any]] = {
                "key": [self.keys.item(i).decode("utf-8", "replace") for i in items]
            }
            for c, name in enumerate(columns):
                table[name] = [row[c] for row in labels]
            return pd.DataFrame(table)
        if not hasattr(data, "iloc"):
            raise InputError("matches(data): data must be the pandas DataFrame the keys came from")
        rows = self.rows(data).copy()
        label_of = dict(zip(items, labels))
        row_items = self.keys.row_items()
        for c, name in enumerate(columns):
            out = f"sender.{name}" if name in rows.columns else name
            # A matching row always has an item.
            rows[out] = [label_of[cast(int, row_items[r])][c] for r in self.indices]
        return rows

    def _items(self) -> list[int]:
        if self.items is None:
            raise InputError(f"{self.protocol} {self.operation}: the {self.role} learns no rows")
        return self.items

    @property
    def refused_rows(self) -> list[int]:
        """``authorize``: the input rows (ascending) whose key the judge refused."""
        if self.refused is None:
            raise InputError(f"{self.protocol} {self.operation}: nothing was refused or signed")
        return list(self.keys.rows_of(self.refused))

    @property
    def seconds(self) -> float:
        """The run's wall time."""
        return float(self.report.get("total_ms", 0.0)) / 1e3


@dataclass(frozen=True)
class ServeStats:
    """What a server did: sessions completed, failed (bad peers, timeouts) and panicked
    (a bug; the server went on), and connections refused before their hello (no TLS
    handshake and hello within ``hello_timeout``, not a hello, refused by TLS, or pushed
    out by newer ones beyond ``max_pending``)."""

    completed: int
    failed: int
    panicked: int
    refused: int = 0


def _path(p: PathLike | None) -> str | None:
    return None if p is None else os.fspath(p)


def _public_key(judge_key: str | PathLike | None) -> str | None:
    """The judge's public key as hex: given as hex, or as the file the judge wrote."""
    if judge_key is None:
        return None
    text = os.fspath(judge_key)
    if os.path.isfile(text):
        with open(text, encoding="utf-8") as f:
            return f.read().strip()
    return text


def _options(
    protocol: str,
    op: str,
    *,
    keys: Keys | None = None,
    db: Any = None,
    judge: Any = None,
    connect: str | None = None,
    listen: str | None = None,
    tls: Tls | None = None,
    insecure_no_tls: bool = False,
    reveal: str = "receiver",
    rpmt: str | None = None,
    security: str = "semi-honest",
    sum_to: str = "sender",
    last_move: str | None = None,
    connect_timeout: float = 30.0,
    timeout: float = 600.0,
    values: Any | None = None,
    value_bound: int = 2**32 - 1,
    fingerprint: str | None = None,
    credentials: Credentials | PathLike | None = None,
    judge_key: str | PathLike | None = None,
    client_id: str | None = None,
    sessions: int = 1,
    max_concurrent: int = 8,
    session_timeout: float = 3600.0,
    grace: float = 30.0,
    max_peer_items: int | None = None,
    hello_timeout: float = 10.0,
    max_pending: int = 64,
    max_pending_per_address: int = 8,
) -> dict[str, Any]:
    """Every option of a run, as the native side takes them."""
    t = tls or Tls()
    if credentials is not None and not isinstance(credentials, Credentials):
        credentials = Credentials.load(os.fspath(credentials))
    return {
        "protocol": protocol,
        "op": op,
        "connect": connect,
        "listen": listen,
        "tls_cert": _path(t.cert),
        "tls_key": _path(t.key),
        "tls_ca": _path(t.ca),
        "tls_server_name": t.server_name,
        "peer_name": t.peer_name,
        "insecure_no_tls": insecure_no_tls,
        "reveal": reveal,
        "rpmt": rpmt,
        "security": security,
        "sum_to": sum_to,
        "last_move": last_move,
        "connect_timeout": connect_timeout,
        "timeout": timeout,
        "keys": keys,
        "db": db,
        "judge": judge,
        "values": None if values is None else [int(v) for v in values],
        "value_bound": value_bound,
        "fingerprint": fingerprint,
        "credentials": credentials,
        "judge_key": _public_key(judge_key),
        "client_id": client_id,
        "sessions": sessions,
        "max_peer_items": max_peer_items,
        "max_concurrent": max_concurrent,
        "session_timeout": session_timeout,
        "grace": grace,
        "hello_timeout": hello_timeout,
        "max_pending": max_pending,
        "max_pending_per_address": max_pending_per_address,
    }


def _holding(items: Any, key: KeySpec) -> dict[str, Any]:
    """What a party brings: a sender database, or keys from ``items``."""
    from ._unbalanced import SenderDb  # imported here: it imports this module

    if isinstance(items, SenderDb):
        if key is not None:
            raise InputError("key= is for items; a SenderDb already has its keys")
        return {"db": items.native}
    return {"keys": to_keys(items, key)}


def _result(
    role: str, protocol: str, op: str, keys: Keys, *, outcome: dict[str, Any], report: str
) -> Result:
    r = Result(role=role, protocol=protocol, operation=op, keys=keys, report=json.loads(report))
    kind = outcome["kind"]
    if kind in ("intersection", "labelled"):
        r.items = outcome["items"]
        r.cardinality = len(outcome["items"])
        if kind == "labelled":
            r.label_columns, r.labels = outcome["columns"], outcome["labels"]
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
    elif kind == "credentials":
        r.credentials, r.refused = outcome["credentials"], outcome["refused"]
    return r


def _run(role: str, protocol: str, op: str, held: dict[str, Any], **options: Any) -> Result:
    opts = _options(protocol, op, **held, **options)
    outcome, report = _setwise.run(role, opts)
    keys = held.get("keys") or Keys([("py", [])])
    return _result(role, protocol, op, keys, outcome=outcome, report=report)


def receiver(
    items: Any,
    protocol: str = DEFAULT_PROTOCOL,
    op: str = "intersection",
    *,
    key: KeySpec = None,
    connect: str | None = None,
    listen: str | None = None,
    tls: Tls | None = None,
    insecure_no_tls: bool = False,
    reveal: str = "receiver",
    rpmt: str | None = None,
    security: str = "semi-honest",
    sum_to: str = "sender",
    last_move: str | None = None,
    fingerprint: str | None = None,
    credentials: Credentials | PathLike | None = None,
    connect_timeout: float = 30.0,
    timeout: float = 600.0,
    max_peer_items: int | None = None,
) -> Result:
    """Runs the receiver (the party that learns the result) against a sender.

    ``items``: a list of str/bytes, a pandas Series/Index, a pyarrow Array/ChunkedArray,
    a DataFrame / Arrow Table with ``key`` (a column name or several), or any frame or
    column of the Arrow PyCapsule interface (Polars, DuckDB). Exactly one of
    ``connect="host:port"`` or ``listen="host:port"``. Plain TCP only on loopback unless
    ``insecure_no_tls=True``; otherwise give ``tls``. The options mean what the CLI's
    flags of the same names mean. ``protocol="mqrpmt"``: ``rpmt`` is the membership
    test's construction, ``"cwprf"`` (``None``) or ``"poprf"`` (the cheaper one when the sender
    holds the larger set), ``last_move`` its last move (``None``: ``"bloom"`` for cwprf,
    ``"shuffle"`` for poprf); both sides must agree. ``op="sum"`` with
    ``sum_to="receiver"`` (both sides): the receiver's result holds the cardinality and
    the sum of the sender's values (reverse PSI-card-sum). ``security="malicious"`` (both
    sides) refuses a protocol proven only against semi-honest peers and runs ``vole``'s
    malicious variant; with ``protocol="auto"`` an intersection runs ``compact`` (under
    2^12 items) or ``vole``, other operations are refused. ``protocol="unbalanced"``:
    ``fingerprint`` refuses a sender whose parameters differ; the result has the sender's
    labels (:meth:`Result.matches`). ``protocol="authorized"`` / ``"partial"``: present the
    ``credentials`` from :func:`authorize` (or their file). ``max_peer_items`` refuses
    a peer that announces more items (a server's cap on what one peer can ask of it).
    """
    return _run(
        "receiver",
        protocol,
        op,
        {"keys": to_keys(items, key)},
        connect=connect,
        listen=listen,
        tls=tls,
        insecure_no_tls=insecure_no_tls,
        reveal=reveal,
        rpmt=rpmt,
        security=security,
        sum_to=sum_to,
        last_move=last_move,
        fingerprint=fingerprint,
        credentials=credentials,
        connect_timeout=connect_timeout,
        timeout=timeout,
        max_peer_items=max_peer_items,
    )


def sender(
    items: Any,
    protocol: str = DEFAULT_PROTOCOL,
    op: str = "intersection",
    *,
    key: KeySpec = None,
    connect: str | None = None,
    listen: str | None = None,
    tls: Tls | None = None,
    insecure_no_tls: bool = False,
    reveal: str = "receiver",
    rpmt: str | None = None,
    security: str = "semi-honest",
    sum_to: str = "sender",
    last_move: str | None = None,
    values: Any | None = None,
    value_bound: int = 2**32 - 1,
    judge_key: str | PathLike | None = None,
    client_id: str | None = None,
    connect_timeout: float = 30.0,
    timeout: float = 600.0,
    max_peer_items: int | None = None,
) -> Result:
    """Runs the sender against one receiver; see :func:`receiver` (and :func:`serve`
    for many).

    ``op="sum"``: ``values`` holds one non-negative integer per input row (rows with one
    key add up; no key's total may exceed ``value_bound``), and the sender learns the
    sum over the intersection; with ``sum_to="receiver"`` (both sides) the receiver
    learns it and the cardinality instead, and the sender nothing (reverse
    PSI-card-sum). ``reveal="both"`` (both sides): the sender learns the
    intersection or its size too. ``protocol="unbalanced"``: ``items`` is a
    :class:`SenderDb`. ``protocol="authorized"`` / ``"partial"``: ``judge_key`` (hex, or
    the judge's public-key file) and the ``client_id`` served.
    """
    return _run(
        "sender",
        protocol,
        op,
        _holding(items, key),
        connect=connect,
        listen=listen,
        tls=tls,
        insecure_no_tls=insecure_no_tls,
        reveal=reveal,
        rpmt=rpmt,
        security=security,
        sum_to=sum_to,
        last_move=last_move,
        values=values,
        value_bound=value_bound,
        judge_key=judge_key,
        client_id=client_id,
        connect_timeout=connect_timeout,
        timeout=timeout,
        max_peer_items=max_peer_items,
    )


def _serve(
    role: str,
    protocol: str,
    op: str,
    held: dict[str, Any],
    log: Callable[[str], Any] | None,
    **options: Any,
) -> ServeStats:
    opts = _options(protocol, op, **held, **options)
    completed, failed, panicked, refused = _setwise.serve(
        role, opts, log if log is not None else logging.getLogger("setwise").info
    )
    return ServeStats(completed=completed, failed=failed, panicked=panicked, refused=refused)


def serve(
    items: Any,
    protocol: str = DEFAULT_PROTOCOL,
    op: str = "intersection",
    *,
    listen: str,
    sessions: int = 0,
    key: KeySpec = None,
    tls: Tls | None = None,
    insecure_no_tls: bool = False,
    reveal: str = "receiver",
    rpmt: str | None = None,
    security: str = "semi-honest",
    sum_to: str = "sender",
    last_move: str | None = None,
    values: Any | None = None,
    value_bound: int = 2**32 - 1,
    judge_key: str | PathLike | None = None,
    client_id: str | None = None,
    max_concurrent: int = 8,
    timeout: float = 600.0,
    max_peer_items: int | None = None,
    session_timeout: float = 3600.0,
    grace: float = 30.0,
    hello_timeout: float = 10.0,
    max_pending: int = 64,
    max_pending_per_address: int = 8,
    log: Callable[[str], Any] | None = None,
) -> ServeStats:
    """Serves receivers as a sender on ``listen``: ``sessions`` completed sessions
    (0: until Ctrl-C / KeyboardInterrupt), at most ``max_concurrent`` at once, each
    within ``session_timeout`` seconds (a frame within ``timeout``). A bad or slow
    receiver fails its own session only. A connection must complete TLS and send its
    hello within ``hello_timeout`` seconds before it takes a session's place; at most
    ``max_pending`` connections (``max_pending_per_address`` from one address, counting
    those pending for over a second) may be without a hello, the oldest dropped for a
    new one, so idle or garbage connections
    cannot hold the server. ``log`` (default: the ``setwise`` logger at INFO) gets one
    line per session and per refused connection. On an interrupt no new session starts,
    running ones get ``grace`` seconds, then ``KeyboardInterrupt`` is raised. The other
    options are :func:`sender`'s.
    """
    return _serve(
        "sender",
        protocol,
        op,
        _holding(items, key),
        log,
        listen=listen,
        sessions=sessions,
        tls=tls,
        insecure_no_tls=insecure_no_tls,
        reveal=reveal,
        rpmt=rpmt,
        security=security,
        sum_to=sum_to,
        last_move=last_move,
        values=values,
        value_bound=value_bound,
        judge_key=judge_key,
        client_id=client_id,
        max_concurrent=max_concurrent,
        timeout=timeout,
        max_peer_items=max_peer_items,
        session_timeout=session_timeout,
        grace=grace,
        hello_timeout=hello_timeout,
        max_pending=max_pending,
        max_pending_per_address=max_pending_per_address,
    )
