"""Python against the CLI on the same sets: ecdh between two processes over loopback.

    python python/bench/overhead.py --log-size 16 --reps 3 --cli target/release/setwise

Each repetition runs the CLI pair and the Python pair (each party its own process, the
receiver's wall time from its process start to exit) and prints the medians.
"""

from __future__ import annotations

import argparse
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


def timed_pair(sender: list[str], receiver: list[str]) -> tuple[float, str]:
    s = subprocess.Popen(sender, stderr=subprocess.DEVNULL)
    start = time.monotonic()
    out = subprocess.run(receiver, check=True, capture_output=True, text=True).stdout
    took = time.monotonic() - start
    s.wait(timeout=600)
    return took, out.strip().splitlines()[-1] if out.strip() else ""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log-size", type=int, default=16)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cli", default="target/release/setwise")
    a = ap.parse_args()
    n = 1 << a.log_size
    tmp = Path(tempfile.mkdtemp())
    xs, ys = tmp / "x.csv", tmp / "y.csv"
    xs.write_text("email\n" + "".join(f"user{i}@example.com\n" for i in range(n)))
    ys.write_text("email\n" + "".join(f"user{i}@example.com\n" for i in range(n // 2, n + n // 2)))
    runs: dict[str, list[float]] = {"cli": [], "python": []}
    for _ in range(a.reps):
        addr = free_port()
        t, _ = timed_pair(
            [a.cli, "sender", "--listen", addr, "--input", str(xs), "--key", "email"],
            [
                a.cli,
                "receiver",
                "--connect",
                addr,
                "--input",
                str(ys),
                "--key",
                "email",
                "--output",
                str(tmp / "out.csv"),
            ],
        )
        runs["cli"].append(t)
        addr = free_port()
        py = [sys.executable, "-c", PY_PARTY]
        t, found = timed_pair([*py, "sender", str(xs), addr], [*py, "receiver", str(ys), addr])
        assert int(found) == n // 2, found
        runs["python"].append(t)
    cli, pyt = statistics.median(runs["cli"]), statistics.median(runs["python"])
    spread = {k: f"{min(v):.2f}-{max(v):.2f}" for k, v in runs.items()}
    print(
        f"ecdh 2^{a.log_size} x 2^{a.log_size}, {a.reps} reps: CLI {cli:.2f} s ({spread['cli']}), "
        f"Python {pyt:.2f} s ({spread['python']}), overhead {100 * (pyt / cli - 1):+.1f} %"
    )


if __name__ == "__main__":
    main()
