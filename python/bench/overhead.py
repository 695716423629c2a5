"""Python against the CLI on the same sets, each party its own process over loopback.

    python python/bench/overhead.py --log-size 16 --reps 3 --cli target/release/setwise
    python python/bench/overhead.py --protocol unbalanced --log-size 20 --reps 3

ecdh: each repetition runs the CLI pair and the Python pair, timing the receiver from its
process start to exit. unbalanced (2^N sender items, 256 receiver items): each
repetition builds the database from the CSV file (process start to exit, saved), then
serves one query from it (the receiver's process wall time, and the query alone from
the receiver's report). Prints the medians and their spread.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


PY_PARTY = """
import sys, pandas as pd, setwise
role, path, addr = sys.argv[1:4]
df = pd.read_csv(path, dtype=str, keep_default_na=False)
if role == "sender":
    setwise.sender(df, key="email", listen=addr)
else:
    r = setwise.receiver(df, key="email", connect=addr)
    print(len(r.indices))
"""


PY_BUILD = """
import sys, pandas as pd, setwise
path, params, out = sys.argv[1:4]
df = pd.read_csv(path, dtype=str, keep_default_na=False)
setwise.SenderDb.build(df, key="email", params=params).save(out)
"""

PY_UNBALANCED = """
import sys, pandas as pd, setwise
role, path, addr = sys.argv[1:4]
if role == "sender":
    setwise.SenderDb.load(path).serve(listen=addr, sessions=1)
else:
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    r = setwise.receiver(df, "unbalanced", key="email", connect=addr)
    print(r.report["total_ms"] / 1e3, len(r.indices))
"""


def timed(cmd: list[str]) -> float:
    start = time.monotonic()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.monotonic() - start


def timed_pair(sender: list[str], receiver: list[str]) -> tuple[float, str]:
    s = subprocess.Popen(sender, stderr=subprocess.DEVNULL)
    start = time.monotonic()
    out = subprocess.run(receiver, check=True, capture_output=True, text=True).stdout
    took = time.monotonic() - start
    s.wait(timeout=600)
    return took, out.strip().splitlines()[-1] if out.strip() else ""


def line(name: str, runs: dict[str, list[float]]) -> str:
    cli, pyt = statistics.median(runs["cli"]), statistics.median(runs["python"])
    spread = {k: f"{min(v):.2f}-{max(v):.2f}" for k, v in runs.items()}
    return (
        f"{name}: CLI {cli:.2f} s ({spread['cli']}), Python {pyt:.2f} s ({spread['python']}), "
        f"overhead {100 * (pyt / cli - 1):+.1f} %"
    )


def emails(path: Path, ids: range) -> None:
    """A one-column CSV file of the keys user{i}@example.com."""
    path.write_text("email\n" + "".join(f"user{i}@example.com\n" for i in ids))


def cli_receiver(a: argparse.Namespace, tmp: Path, addr: str, ys: Path, *extra: str) -> list[str]:
    """The CLI receiver's command: the keys of `ys`, its rows written to out.csv."""
    out = str(tmp / "out.csv")
    return [
        a.cli,
        "receiver",
        *extra,
        "--connect",
        addr,
        "--input",
        str(ys),
        "--key",
        "email",
        "--output",
        out,
    ]


def ecdh(a: argparse.Namespace, tmp: Path) -> None:
    n = 1 << a.log_size
    xs, ys = tmp / "x.csv", tmp / "y.csv"
    emails(xs, range(n))
    emails(ys, range(n // 2, n + n // 2))
    runs: dict[str, list[float]] = {"cli": [], "python": []}
    for _ in range(a.reps):
        addr = free_port()
        t, _ = timed_pair(
            [a.cli, "sender", "--listen", addr, "--input", str(xs), "--key", "email"],
            cli_receiver(a, tmp, addr, ys),
        )
        runs["cli"].append(t)
        addr = free_port()
        py = [sys.executable, "-c", PY_PARTY]
        t, found = timed_pair([*py, "sender", str(xs), addr], [*py, "receiver", str(ys), addr])
        assert int(found) == n // 2, found
        runs["python"].append(t)
    print(line(f"ecdh 2^{a.log_size} x 2^{a.log_size}, {a.reps} reps", runs))


def unbalanced(a: argparse.Namespace, tmp: Path) -> None:
    n, m = 1 << a.log_size, 256
    params = "64K-256" if a.log_size <= 16 else "1M-256"
    xs, ys = tmp / "x.csv", tmp / "y.csv"
    emails(xs, range(n))
    emails(ys, range(n - m // 2, n + m // 2))
    build: dict[str, list[float]] = {"cli": [], "python": []}
    pair: dict[str, list[float]] = {"cli": [], "python": []}
    query: dict[str, list[float]] = {"cli": [], "python": []}
    for rep in range(a.reps):
        d_cli, d_py = tmp / f"db-cli-{rep}", tmp / f"db-py-{rep}"
        build["cli"].append(
            timed(
                [
                    a.cli,
                    "db",
                    "build",
                    "--input",
                    str(xs),
                    "--key",
                    "email",
                    *("--params", params),
                    "--out",
                    str(d_cli),
                ]
            )
        )
        build["python"].append(timed([sys.executable, "-c", PY_BUILD, str(xs), params, str(d_py)]))
        addr = free_port()
        t, _ = timed_pair(
            [a.cli, "sender", "--protocol", "unbalanced", "--db", str(d_cli), "--listen", addr],
            cli_receiver(
                a, tmp, addr, ys, "--protocol", "unbalanced", "--report", str(tmp / "r.json")
            ),
        )
        pair["cli"].append(t)
        query["cli"].append(json.loads((tmp / "r.json").read_text())["total_ms"] / 1e3)
        addr = free_port()
        py = [sys.executable, "-c", PY_UNBALANCED]
        t, out = timed_pair([*py, "sender", str(d_py), addr], [*py, "receiver", str(ys), addr])
        seconds, found = out.split()
        assert int(found) == m // 2, found
        pair["python"].append(t)
        query["python"].append(float(seconds))
    name = f"unbalanced 2^{a.log_size} x {m} ({params}), {a.reps} reps"
    print(line(f"{name}, build and save", build))
    print(line(f"{name}, load, serve and query (receiver process)", pair))
    print(line(f"{name}, the query alone (receiver report)", query))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--protocol", choices=["ecdh", "unbalanced"], default="ecdh")
    ap.add_argument("--log-size", type=int, default=16)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cli", default="target/release/setwise")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    (ecdh if a.protocol == "ecdh" else unbalanced)(a, tmp)


if __name__ == "__main__":
    main()
