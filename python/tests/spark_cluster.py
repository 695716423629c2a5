"""A Spark standalone cluster on this machine for the tests and benchmarks: a master and
two workers started from the installed pyspark distribution with its own launcher
(`bin/spark-class`; the pip distribution has no `sbin/start-master.sh`), on loopback
ports, each worker with its own work directory. Executors run the Python of this
process (`spark.pyspark.python`), the virtual environment the setwise package is
installed in: that is how they find its native module. A cluster of several machines
installs the same wheel in the Python its workers run (docs/scale-out.md)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class Cluster(NamedTuple):
    """A running standalone cluster: the master's URL and its web UI's."""

    url: str
    ui: str

    def applications(self) -> list[dict[str, Any]]:
        """The master's running applications, as its ``/json/`` lists them (each with
        ``name`` and ``cores``, the cores its executors hold now)."""
        with urllib.request.urlopen(f"{self.ui}/json/", timeout=5) as r:
            return list(json.load(r).get("activeapps", []))


@contextlib.contextmanager
def standalone(
    work: Path, workers: int = 2, cores: int = 2, memory: str = "2g"
) -> Iterator[Cluster]:
    """Runs a master and `workers` workers (`cores` cores and `memory` each) until the
    block ends; yields it once every worker has registered."""
    home = spark_home()
    work.mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        SPARK_HOME=str(home),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(work / "logs"),
    )
    port, ui = _port(), _port()
    url = f"spark://127.0.0.1:{port}"
    launcher = str(home / "bin" / "spark-class")
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> None:
        log = open(work / f"{name}.log", "wb")
        procs.append(subprocess.Popen([launcher, *args], env=env, stdout=log, stderr=log))

    try:
        master = "org.apache.spark.deploy.master.Master"
        start("master", master, "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui))
        for i in range(workers):
            start(
                f"worker-{i}",
                "org.apache.spark.deploy.worker.Worker",
                *("--host", "127.0.0.1", "--cores", str(cores), "--memory", memory),
                *("--work-dir", str(work / f"worker-{i}"), "--webui-port", str(_port())),
                url,
            )
        deadline = time.monotonic() + 120
        while True:
            for p in procs:
                if p.poll() is not None:
                    logs = "".join(
                        f.read_text(errors="replace")[-2000:] for f in sorted(work.glob("*.log"))
                    )
                    raise RuntimeError(f"a Spark daemon exited ({p.returncode}):\n{logs}")
            with contextlib.suppress(OSError, ValueError):
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                    state = json.load(r)
                alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
                if len(alive) == workers:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Spark cluster did not come up in 120 s (see {work})")
            time.sleep(0.5)
        yield Cluster(url, f"http://127.0.0.1:{ui}")
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def main(argv: list[str]) -> int:
    """``python spark_cluster.py DIR [WORKER_MEMORY]`` (the benchmarks): runs a cluster
    with its files in DIR until SIGTERM or SIGINT; prints the master's URL once it is up."""
    import signal

    work = Path(argv[1])
    memory = argv[2] if len(argv) > 2 else "2g"

    def stop(*_: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    with standalone(work, memory=memory) as cluster:
        print(cluster.url, flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv))
