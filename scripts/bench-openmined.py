#!/usr/bin/env python3
"""Times OpenMined PSI (pip install openmined-psi) on the workloads of `setwise bench ecdh`.

Both parties run in this one process, one after the other (the library is
single-threaded), so the total is the sum of both parties' compute; no network time is
included. Message sizes are the serialised protobufs. Usage:

    pip install openmined-psi
    python3 scripts/bench-openmined.py --sizes 12,16 [--structure raw|gcs|bloom]
"""

import argparse
import time

import private_set_intersection.python as psi


def items(prefix, n, start=0):
    return [f"{prefix}{i:07d}@example.org" for i in range(start, start + n)]


def run(log_n, structure, reveal):
    n = 1 << log_n
    server_items = items("user", n)
    client_items = items("user", n // 2) + items("member", n - n // 2)
    ds = {"raw": psi.DataStructure.RAW, "gcs": psi.DataStructure.GCS, "bloom": psi.DataStructure.BLOOM_FILTER}[structure]

    t0 = time.perf_counter()
    client = psi.client.CreateWithNewKey(reveal)
    server = psi.server.CreateWithNewKey(reveal)
    request = client.CreateRequest(client_items)
    t1 = time.perf_counter()
    setup = server.CreateSetupMessage(1e-9, len(client_items), server_items, ds)
    response = server.ProcessRequest(request)
    t2 = time.perf_counter()
    result = client.GetIntersection(setup, response) if reveal else client.GetIntersectionSize(setup, response)
    t3 = time.perf_counter()
    size = len(result) if reveal else result
    assert size == n // 2, (size, n // 2)
    up = len(request.SerializeToString())
    down = len(setup.SerializeToString()) + len(response.SerializeToString())
    return (t1 - t0) + (t3 - t2), t2 - t1, t3 - t0, up, down, size


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="12,16", help="powers of two, comma-separated")
    ap.add_argument("--structure", default="raw", choices=["raw", "gcs", "bloom"])
    a = ap.parse_args()
    print(f"OpenMined PSI {psi.__version__}, setup structure {a.structure}, one thread")
    print(f"{'sizes':<12} {'operation':<13} {'client s':>9} {'server s':>9} {'total s':>9} {'C→S MB':>9} {'S→C MB':>9} {'result':>8}")
    for log_n in (int(s) for s in a.sizes.split(",")):
        for reveal, op in ((True, "intersection"), (False, "cardinality")):
            c, s, total, up, down, size = run(log_n, a.structure, reveal)
            print(f"2^{log_n}×2^{log_n:<6} {op:<13} {c:>9.3f} {s:>9.3f} {total:>9.3f} {up / 1e6:>9.3f} {down / 1e6:>9.3f} {size:>8}")


if __name__ == "__main__":
    main()
