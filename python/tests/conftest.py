"""Helpers: two parties in one process (the GIL is released during runs, so threads
run concurrently) and free loopback ports."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
from pathlib import Path
from typing import Any, Callable

import pytest


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def pair(sender: Callable[[str], Any], receiver: Callable[[str], Any]) -> tuple[Any, Any]:
    """Runs `sender(addr)` listening in a thread and `receiver(addr)` connecting; returns
    both results (re-raising either side's exception)."""
    addr = free_port()
    out: dict[str, Any] = {}

    def run_sender() -> None:
        try:
            out["sender"] = sender(addr)
        except BaseException as e:
            out["sender_error"] = e

    t = threading.Thread(target=run_sender)
    t.start()
    try:
        got = receiver(addr)
    except BaseException:
        # The listening sender may still wait for a connection: give it one that ends.
        host, port = addr.split(":")
        with contextlib.suppress(OSError):
            socket.create_connection((host, int(port)), timeout=1).close()
        raise
    finally:
        t.join(timeout=120)
    if "sender_error" in out:
        raise out["sender_error"]
    return out["sender"], got


def cli() -> Path | None:
    """The setwise CLI, when the test script built it (SETWISE_BIN) or it is on PATH."""
    path = os.environ.get("SETWISE_BIN") or shutil.which("setwise")
    return Path(path) if path else None


@pytest.fixture
def setwise_cli() -> Path:
    path = cli()
    if path is None:
        pytest.skip("the setwise CLI is not built (set SETWISE_BIN)")
    return path
