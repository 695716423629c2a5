"""Type stubs of the native module."""

from typing import Any

__version__: str

class Error(Exception): ...
class InputError(Error): ...
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
def run(
    role: str,
    keys: Keys,
    protocol: str = "ecdh",
    op: str = "intersection",
    *,
    connect: str | None = None,
    listen: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    tls_ca: str | None = None,
    tls_server_name: str | None = None,
    peer_name: str | None = None,
    insecure_no_tls: bool = False,
    reveal: str = "receiver",
    last_move: str = "bloom",
    values: list[int] | None = None,
    value_bound: int = ...,
    connect_timeout: float = 30.0,
    timeout: float = 600.0,
) -> tuple[dict[str, Any], str]: ...
