"""An S3-compatible server for the Spark tests of the exchange on object storage:
SeaweedFS (`weed mini`, run by ``scripts/s3-server --serve``, which installs it into a
cache directory once) on loopback ports of its own, with the bucket ``exchange``. The
same server and settings as the CLI's tests (crates/setwise-cli/tests/common/s3.rs)."""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from setwise._setwise import Error, staged_exchange_read

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "s3-server"
BUCKET = "exchange"
ACCESS_KEY, SECRET_KEY = "setwise-test", "setwise-test-secret"


# What `weed mini` says of a port taken before its own check, and after it.
_PORT_TAKEN = re.compile(r"is not available on .* and cannot be used|address already in use")


def _ephemeral_low() -> int:
    """The lowest port the kernel gives outgoing connections (Linux's default if unreadable).
    Ports below it cannot be taken meanwhile by a client's source port, the race that had a
    server fail with "address already in use" when its base came from the ephemeral range."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


# Not the module `random`, which a test may seed: every server would then try the same ports.
_PORTS = random.SystemRandom()


def _ten_free_ports() -> int:
    """The first of ten consecutive loopback ports free a moment ago, below the ephemeral
    range."""
    high = max(_ephemeral_low() - 10, 10_010)
    for _ in range(200):
        base = _PORTS.randrange(10_000, high)
        free = True
        for p in range(base, base + 10):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    free = False
                    break
        if free:
            return base
    raise RuntimeError(f"no ten free consecutive loopback ports below {high}")


class Server(NamedTuple):
    """A running server: the AWS variables that reach it, and its filer's address (the
    storage's own HTTP API, without S3's checks: a storage operator's view, with which
    the tests damage objects)."""

    env: dict[str, str]
    filer: str

    def replace(self, uri: str, data: bytes) -> None:
        """Puts `data` in place of the object at ``s3://BUCKET/KEY``, through the filer."""
        request = urllib.request.Request(
            self._filer_url(uri),
            data=data,
            method="PUT",
            headers={"Content-Type": "application/octet-stream"},
        )
        with urllib.request.urlopen(request, timeout=30) as r:
            r.read()

    def delete(self, uri: str) -> None:
        """Removes the object at ``s3://BUCKET/KEY``, through the filer."""
        request = urllib.request.Request(self._filer_url(uri), method="DELETE")
        with urllib.request.urlopen(request, timeout=30) as r:
            r.read()

    def _filer_url(self, uri: str) -> str:
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        return f"{self.filer}/buckets/{bucket}/{key}"


@contextlib.contextmanager
def serving(data: Path) -> Iterator[Server]:
    """Runs a server with its data in `data` until the block ends; yields it (its AWS
    variables are also set in this process's environment meanwhile, so that the parties
    it starts inherit them)."""
    data.mkdir(parents=True, exist_ok=True)
    # Other AWS settings of this machine (a profile, a session token, real keys) stay out
    # of the test runs, which pass every AWS_* variable on to their executors.
    names = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL")
    saved: dict[str, str | None] = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    saved.update({k: os.environ.get(k) for k in (*names, "AWS_ALLOW_HTTP")})
    for k in saved:
        os.environ.pop(k, None)
    server: subprocess.Popen[bytes] | None = None
    try:
        # A port taken between the check and the server's bind (by another program) is a
        # retry on other ports, not a failure.
        for _ in range(4):
            if server is not None:  # a failed start's state names its ports
                server.wait()
                shutil.rmtree(data / "data", ignore_errors=True)
            base = _ten_free_ports()
            env = dict(
                zip(names, (ACCESS_KEY, SECRET_KEY, "us-east-1", f"http://127.0.0.1:{base + 6}"))
            )
            env["AWS_ALLOW_HTTP"] = "true"
            os.environ.update(env)
            with open(data / "weed.log", "wb") as log:
                server = subprocess.Popen(
                    ["bash", str(SCRIPT), "--serve", str(data), str(base)],
                    env=dict(
                        os.environ,
                        SETWISE_S3_ACCESS_KEY=ACCESS_KEY,
                        SETWISE_S3_SECRET_KEY=SECRET_KEY,
                    ),
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
            if _ready(server, data):
                break
        else:
            raise RuntimeError("weed mini found a port of each of four ranges taken")
        yield Server(env, f"http://127.0.0.1:{base + 4}")
    finally:
        for k in saved:
            os.environ.pop(k, None)
        os.environ.update({k: v for k, v in saved.items() if v is not None})
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def _ready(server: subprocess.Popen[bytes], data: Path) -> bool:
    """Waits until the server's bucket answers (True), or it exits because a port was
    taken (False); raises for anything else."""
    deadline = time.monotonic() + 120  # the first use installs the server
    while True:
        if server.poll() is not None:
            text = (data / "weed.log").read_text(errors="replace")[-3000:]
            if _PORT_TAKEN.search(text):
                return False
            raise RuntimeError(f"weed mini exited ({server.returncode}):\n{text}")
        # Ready once a read of a missing object in the bucket is answered.
        with contextlib.suppress(Error, OSError):
            if staged_exchange_read(f"s3://{BUCKET}/.ready", "probe", 16) is None:
                return True
        if time.monotonic() > deadline:
            raise RuntimeError(f"weed mini not ready in 120 s (see {data / 'weed.log'})")
        time.sleep(0.2)


def main(argv: list[str]) -> int:
    """``python s3_server.py DIR`` (the benchmarks): runs a server with its data in DIR
    until SIGTERM or SIGINT; prints the AWS variables that reach it (NAME=VALUE lines,
    then an empty line) once it is ready."""
    import signal

    def stop(*_: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    with serving(Path(argv[1])) as server:
        print("".join(f"{k}={v}\n" for k, v in server.env.items()), flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv))
