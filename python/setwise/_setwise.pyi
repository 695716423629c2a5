"""Type stubs of the native module."""

import os
from collections.abc import Callable
from typing import Any

__version__: str

class Error(Exception): ...

class InputError(Error):
    field: str | None
    """The parameter, option or piece of a run at fault, when the error names one
    (``key_columns``, ``table_size``, ``reveal``, ``workdir``, ...); None otherwise."""

class PeerError(Error): ...
class NetworkError(Error): ...

class Keys:
    """A party's distinct keys and, for each input row, which key it is."""

    key_columns: int
    rows: int
    empty_rows: int
    repeated_rows: int
    def __init__(self, columns: list[tuple[str, list[Any]]]) -> None: ...
    def __len__(self) -> int: ...
    def rows_of(self, items: list[int]) -> list[int]: ...
    def row_items(self) -> list[int | None]: ...
    def item(self, i: int) -> bytes: ...

class EcdhReceiver:
    """The receiver's side of DH-PSI between its request and the sender's response."""

    @staticmethod
    def request(keys: Keys, op: str = "intersection") -> tuple[EcdhReceiver, bytes]: ...
    def finish(self, response: bytes) -> list[int] | int: ...
    def to_bytes(self) -> bytes: ...
    @staticmethod
    def from_bytes(data: bytes) -> EcdhReceiver: ...

def ecdh_respond(keys: Keys, request: bytes, op: str = "intersection") -> bytes: ...

class SenderDb:
    """The unbalanced sender's database (native half of ``setwise.SenderDb``)."""

    @staticmethod
    def build(
        keys: Keys,
        labels: list[tuple[str, list[str | None]]],
        params: str = "auto",
        receiver_max: int = 256,
        key_file: str | None = None,
        link: str = "1000",
        out: str | None = None,
        resume: bool = False,
    ) -> SenderDb: ...
    @staticmethod
    def load(
        path: str, key_file: str | None = None, compact: bool = False, memory: int | None = None
    ) -> SenderDb: ...
    def save(self, path: str) -> None: ...
    def insert(self, keys: Keys, labels: list[tuple[str, list[str | None]]]) -> str: ...
    def remove(self, keys: Keys) -> str: ...
    def keep_key_apart(self, key_file: str) -> None: ...
    def info(self) -> str: ...
    def __len__(self) -> int: ...

class Judge:
    """A judge's key and allow-list (native half of ``setwise.Judge``)."""

    public_key: str
    fingerprint: str
    def __init__(
        self,
        allow: Keys,
        secret_key: str,
        clients: list[str | None] | None = None,
        fraction: float = 0.1,
        strict: bool = False,
    ) -> None: ...

class Credentials:
    """A client's signatures from the judge, bound to its identity."""

    client_id: str
    mode: str
    judge_key: str
    @staticmethod
    def load(path: str | os.PathLike[str]) -> Credentials: ...
    def save(self, path: str | os.PathLike[str]) -> None: ...
    def __len__(self) -> int: ...

DEFAULT_PROTOCOL: str
STAGED_DEFAULT_PROTOCOL: str
PROTOCOLS: list[str]

def protocol_bringing(what: str, operation: str, role: str) -> str: ...
def protocol_spec(name: str) -> dict[str, Any]: ...
def run(role: str, options: dict[str, Any]) -> tuple[dict[str, Any], str]: ...
def serve(
    role: str, options: dict[str, Any], log: Callable[[str], Any] | None = None
) -> tuple[int, int, int, int]: ...

# Staged ecdh runs one bucket at a time (used by setwise.spark).

PartInfo = tuple[int, int, str]

def staged_hello(
    run_id: str,
    operation: str,
    key_columns: int,
    buckets: str,
    bucket_key: str | None,
    role_name: str,
    set_size: int,
    run_seed: bytes,
) -> bytes: ...
def staged_new_seed() -> bytes: ...
def staged_fingerprint(items: Any) -> tuple[int, bytes]: ...
def staged_fingerprint_combine(key_columns: int, batches: list[tuple[int, bytes]]) -> str: ...
def staged_read_marker(
    data: bytes, stage: int, role_name: str, path: str, run_id: str, exchange_key: bytes
) -> tuple[str, str]: ...
def staged_seal_marker(json: str, run_id: str, exchange_key: bytes) -> str: ...
def staged_abort_note(run_id: str, role_name: str, error: str, exchange_key: bytes) -> bytes: ...
def staged_read_abort(
    data: bytes, role_name: str, path: str, run_id: str, exchange_key: bytes
) -> str: ...
def staged_new_exchange_key() -> str: ...
def staged_exchange_key_fingerprint(exchange_key: bytes) -> str: ...
def staged_shown(text: str) -> str: ...
def staged_read_local(root: str, path: str, limit: int) -> bytes | None: ...
def staged_write_local(root: str, path: str, data: bytes) -> None: ...
def staged_part_digest(
    session_hex: str, stage: int, role_name: str, part: int, data: bytes
) -> str: ...

class StagedPlan:
    """What both parties of a staged ecdh run agreed, and each stage's step on a bucket."""

    buckets: int
    session: str
    sender_size: int
    receiver_size: int
    def __init__(
        self,
        run_id: str,
        operation: str,
        key_columns: int,
        buckets: str,
        bucket_key: str | None,
        ours: bytes,
        theirs: bytes,
    ) -> None: ...
    def bucket_of(self, items: Any) -> bytes: ...
    def blind(self, run_seed: bytes, bucket: int, items: Any) -> list[bytes]: ...
    def reblind(
        self, run_seed: bytes, bucket: int, chunks: list[bytes], info: PartInfo
    ) -> list[bytes]: ...
    def finish(
        self,
        run_seed: bytes,
        bucket: int,
        own_count: int,
        s1: list[bytes],
        s1_info: PartInfo,
        s2: list[bytes],
        s2_info: PartInfo,
    ) -> list[int]: ...
    def summarize(self, stage: int, part: int, chunks: list[bytes]) -> PartInfo: ...
    def mix_split(self, values: bytes) -> list[tuple[int, bytes]]: ...
    def raw(
        self,
        run_seed: bytes,
        bucket: int,
        items: Any = None,
        chunks: list[bytes] | None = None,
        info: PartInfo | None = None,
    ) -> bytes: ...
    def frame_sorted(self, stage: int, pieces: list[bytes]) -> list[bytes]: ...
    def open_part(
        self, run_seed: bytes, stage: int, part: int, chunks: list[bytes], info: PartInfo
    ) -> bytes: ...

def staged_split_values(values: bytes, n: int) -> list[tuple[int, bytes]]: ...
def staged_count_matches(sender: list[bytes], own: list[bytes]) -> int: ...

class StagedDriver:
    """A replayed staged run's driver on a cluster: the library's runner, its buckets in
    the executors (reached through `remote`: `bucket_sizes(session)` and
    `run(stage, session, ready)`)."""

    def __init__(
        self,
        run_id: str,
        protocol: str,
        operation: str,
        key_columns: int,
        buckets: str,
        bucket_key: str | None,
        role_name: str,
        exchange: str,
        workdir: str,
        exchange_key: bytes,
        size: int,
        fingerprint: str,
        remote: Any,
        sum_to: str = "sender",
    ) -> None: ...
    @property
    def learns(self) -> bool: ...
    def step(self) -> tuple[str, int, str]: ...
    def stage_label(self, n: int) -> str: ...
    def protocol_agreed(self) -> tuple[str, str] | None: ...
    def result_size(self) -> int | None: ...
    def result_sum(self) -> str | None: ...

class StagedWorker:
    """An executor's worker of a replayed staged run (pickles as settings and paths)."""

    def __init__(
        self,
        run_id: str,
        protocol: str,
        operation: str,
        key_columns: int,
        buckets: str,
        bucket_key: str | None,
        role_name: str,
        size: int,
        exchange: str,
        workdir: str,
        session: str,
        attempt: str,
        sum_to: str = "sender",
    ) -> None: ...
    def buckets(self) -> int: ...
    def bucket_of(self, items: Any) -> bytes: ...
    def serve(
        self,
        items: Any,
        parts: Any,
        task: int,
        tasks: int,
        linger: float,
        first: int,
        values: Any | None = None,
        value_bound: int | None = None,
        live_memory: int | None = None,
    ) -> str: ...

def staged_read_rows(workdir: str, bucket: int) -> list[bytes]: ...
def staged_read_ids(workdir: str, bucket: int) -> tuple[list[bytes], list[bytes], list[bytes]]: ...
def staged_exchange_read(exchange: str, name: str, limit: int) -> bytes | None: ...
