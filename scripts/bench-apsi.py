#!/usr/bin/env python3
"""Times Microsoft APSI (pip install apsi, the PyAPSI wrapper) on setwise's unbalanced workloads.

Status: written against PyAPSI 0.3's Python layer and checked with a stand-in for its
C++ extension; not yet run against real APSI, because `pip install apsi` has no Linux
wheel on the machines setwise is developed on and its source build downloads from
GitHub. docs/benchmarks.md compares with APSI figures measured with its C++ CLI.

Both parties run in this one process, one after the other; no network time is included.
Message sizes are the wrapper's serialised messages (APSI's own wire format, zstd
compressed where SEAL was built with it). Workloads as in `setwise bench`:

    sender   user{i:07}.{tag}@example.org                      i < 2^sender_log
    receiver user{i:07}.{tag}@example.org  for i < common      (the common items)
             member{i:07}.{tag}@example.net otherwise
    common = round(overlap * min(sender, receiver)), overlap 0.5 by default
    label of sender item i (labelled runs): the first L hex digits of SHAKE-256("label{i}")

Labels are ASCII on purpose: the wrapper passes labels as Python str, returns them
decoded as UTF-8 and cuts them at the first NUL byte, so arbitrary bytes do not survive.

Usage (the standard workloads):

    pip install apsi
    python3 scripts/bench-apsi.py --sender-log 16 --receiver-count 1
    python3 scripts/bench-apsi.py --sender-log 20 --receiver-count 1
    python3 scripts/bench-apsi.py --sender-log 20 --receiver-count 256
    python3 scripts/bench-apsi.py --sender-log 20 --receiver-count 1 --label-bytes 32
    python3 scripts/bench-apsi.py --sender-log 20 --receiver-count 256 --label-bytes 32
    python3 scripts/bench-apsi.py --suite              # all five in a row

Parameters: --params FILE (an APSI JSON file), --params-name NAME (one of the copies of
APSI's parameters/*.json embedded below; --list-params), or by default the embedded file
whose name bounds (SENDER-RECEIVER[-LABELBYTES]) fit the workload, as APSI's file names
suggest. Peak memory of the whole run: prefix the command with `/usr/bin/time -v`.

Caveat: PyAPSI's LabeledServer has no batch insert; it inserts one item at a time, and APSI
regenerates the affected bin bundles' polynomials after every insert, so a labelled
database of 2^20 items takes far too long to build this way (--max-build-seconds stops it
and prints the rate reached).
"""

import argparse
import hashlib
import json
import math
import os
import random
import resource
import statistics
import sys
import time

# Copies of microsoft/APSI parameters/*.json at v0.12.0 (commit b967a126), the APSI that
# PyAPSI 0.2.x builds. PyAPSI 0.3 builds APSI 1.1, whose README says the shipped sets
# were retuned (its 1M-256 example has plain_modulus 65537 and coeff_modulus_bits
# [40, 40, 24]); pass --params to use other values.
APSI_PARAMS = {
    "1M-1": {
        "table_params": {"hash_func_count": 1, "table_size": 409, "max_items_per_bin": 55},
        "item_params": {"felts_per_item": 5},
        "query_params": {"ps_low_degree": 0, "query_powers": list(range(1, 56))},
        "seal_params": {"plain_modulus": 65537, "poly_modulus_degree": 2048, "coeff_modulus_bits": [48]},
    },
    "1M-256": {
        "table_params": {"hash_func_count": 3, "table_size": 585, "max_items_per_bin": 180},
        "item_params": {"felts_per_item": 7},
        "query_params": {
            "ps_low_degree": 0,
            "query_powers": [1, 3, 4, 6, 10, 13, 15, 21, 29, 37, 45, 53, 61, 69, 77, 81, 83, 86, 87, 90, 92, 96],
        },
        "seal_params": {"plain_modulus": 40961, "poly_modulus_degree": 4096, "coeff_modulus_bits": [40, 32, 32]},
    },
    "16M-1024": {
        "table_params": {"hash_func_count": 3, "table_size": 1638, "max_items_per_bin": 1304},
        "item_params": {"felts_per_item": 5},
        "query_params": {"ps_low_degree": 44, "query_powers": [1, 3, 11, 18, 45, 225]},
        "seal_params": {"plain_modulus_bits": 22, "poly_modulus_degree": 8192, "coeff_modulus_bits": [56, 56, 56, 50]},
    },
    "1M-1-32": {
        "table_params": {"hash_func_count": 1, "table_size": 1638, "max_items_per_bin": 228},
        "item_params": {"felts_per_item": 5},
        "query_params": {"ps_low_degree": 0, "query_powers": [1, 3, 8, 19, 33, 39, 92, 102]},
        "seal_params": {"plain_modulus": 65537, "poly_modulus_degree": 8192, "coeff_modulus_bits": [56, 48, 48]},
    },
    "1M-256-288": {
        "table_params": {"hash_func_count": 3, "table_size": 682, "max_items_per_bin": 512},
        "item_params": {"felts_per_item": 6},
        "query_params": {
            "ps_low_degree": 0,
            "query_powers": [
                1, 3, 4, 6, 10, 13, 15, 21, 29, 37, 45, 53, 61, 69, 75, 77, 80, 84, 86, 87, 89, 90, 181, 183,
                188, 190, 195, 197, 206, 213, 214, 222, 230, 238, 246, 254, 261, 337, 338, 345, 353, 361, 370,
                372, 377, 379, 384, 386, 477, 479, 486, 487, 495, 503, 511,
            ],
        },
        "seal_params": {"plain_modulus_bits": 18, "poly_modulus_degree": 4096, "coeff_modulus_bits": [48, 32, 24]},
    },
    "1M-4096-32": {
        "table_params": {"hash_func_count": 3, "table_size": 6552, "max_items_per_bin": 770},
        "item_params": {"felts_per_item": 5},
        "query_params": {"ps_low_degree": 26, "query_powers": [1, 5, 8, 27, 135]},
        "seal_params": {"plain_modulus_bits": 21, "poly_modulus_degree": 8192, "coeff_modulus_bits": [48, 56, 56, 48]},
    },
    "16M-1-32": {
        "table_params": {"hash_func_count": 1, "table_size": 2048, "max_items_per_bin": 782},
        "item_params": {"felts_per_item": 4},
        "query_params": {"ps_low_degree": 26, "query_powers": [1, 5, 8, 27, 135]},
        "seal_params": {"plain_modulus_bits": 21, "poly_modulus_degree": 8192, "coeff_modulus_bits": [56, 56, 56, 50]},
    },
}

# (sender log2, receiver count, label bytes) of the workloads that setwise benchmarks.
SUITE = [(16, 1, 0), (20, 1, 0), (20, 256, 0), (20, 1, 32), (20, 256, 32)]


# ---------------------------------------------------------------- workload


def round_half_away(x):
    """Rust's f64::round (Python's round() rounds half to even)."""
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def make_sets(n_sender, n_receiver, common, tag):
    sender = [f"user{i:07d}.{tag}@example.org" for i in range(n_sender)]
    receiver = [
        f"user{i:07d}.{tag}@example.org" if i < common else f"member{i:07d}.{tag}@example.net"
        for i in range(n_receiver)
    ]
    return sender, receiver


def label_for(i, length):
    """Deterministic ASCII label of `length` bytes for sender item i."""
    return hashlib.shake_256(f"label{i}".encode()).hexdigest((length + 1) // 2)[:length]


# ---------------------------------------------------------------- parameters


def name_bounds(name):
    """'16M-1024' -> (2^24, 1024, 0); '1M-1-32' -> (2^20, 1, 32); None if not of that form."""
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    parts = name.split("-")
    try:
        s = parts[0]
        sender = int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)
        receiver = int(parts[1])
        label = int(parts[2]) if len(parts) > 2 else 0
    except (ValueError, IndexError, KeyError):
        return None
    return sender, receiver, label


def choose_params(n_sender, n_receiver, label_bytes):
    """The embedded set with the smallest name bounds that fit, preferring sets tuned for
    the same mode (labelled sets carry a third number); any set works in either mode."""
    fits = []
    for name in APSI_PARAMS:
        s, r, lab = name_bounds(name)
        if s < n_sender or r < n_receiver:
            continue
        same_mode = (lab >= label_bytes > 0) or (lab == 0 and label_bytes == 0)
        fits.append((not same_mode, s, r, lab, name))
    if not fits:
        return None
    return min(fits)[-1]


def plain_bits(seal):
    """Bit count of the plain modulus (SEAL picks a prime of exactly plain_modulus_bits)."""
    if "plain_modulus" in seal:
        return int(seal["plain_modulus"]).bit_length()
    return int(seal["plain_modulus_bits"])


def target_powers(ps_low, max_bin):
    """Powers the sender computes (APSI util::create_powers_set)."""
    if not ps_low:
        return list(range(1, max_bin + 1))
    high = ps_low + 1
    return list(range(1, ps_low + 1)) + list(range(high, (max_bin // high) * high + 1, high))


def powers_depth(sources, targets):
    """Multiplicative depth of APSI's PowersDag (depth-optimal sums of two targets)."""
    tset, depth = set(targets), {s: 0 for s in sources}
    for p in targets:
        if p in depth:
            continue
        best = p - 1
        for s1 in targets:
            if s1 >= p:
                break
            s2 = p - s1
            if s2 in tset and s1 in depth and s2 in depth:
                best = min(best, max(depth[s1], depth[s2]) + 1)
        depth[p] = best
    return max(depth.values())


def normal_cdf(x):
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def cuckoo_log2_failure(n, table_size, h):
    """log2 of the receiver's cuckoo-insertion failure probability (no stash).

    h = 3: the empirical fit of Pinkas, Schneider, Tkachenko, Yanai (Eurocrypt 2019), as in
    cryptoTools' CuckooIndex::selectParams: security lambda = a*e + b with e = table/n,
    a = 123.5 * Phi((log2 n - 6.3) / 2.3), b = -130 * Phi((log2 n - 6.45) / 2.18) - log2 n.
    h = 1: the birthday bound (any two items in the same slot fails).
    """
    if n < 2:
        return None
    if h == 1:
        p_ok = 1.0
        for i in range(n):
            p_ok *= max(0.0, 1 - i / table_size)
        return math.log2(1 - p_ok) if p_ok < 1 else None
    if h == 3 and n >= 64:
        nn = math.log2(n)
        a = 123.5 * normal_cdf((nn - 6.3) / 2.3)
        b = -130 * normal_cdf((nn - 6.45) / 2.18) - nn
        return -(a * table_size / n + b)
    return None


def describe_params(p, n_sender, n_receiver, label_bytes, nonce_bytes):
    t, it, q, seal = p["table_params"], p["item_params"], p["query_params"], p["seal_params"]
    N, felts, h = seal["poly_modulus_degree"], it["felts_per_item"], t["hash_func_count"]
    bits_felt = plain_bits(seal) - 1
    item_bits = bits_felt * felts
    per_bundle = N // felts
    bundle_idx = t["table_size"] // per_bundle
    max_bin, ps_low = t["max_items_per_bin"], q["ps_low_degree"]
    log2_fpp = min(0.0, (math.log2(max_bin) - bits_felt) * felts)
    targets = target_powers(ps_low, max_bin)
    depth = powers_depth(sorted(q["query_powers"]), targets)
    plain = seal.get("plain_modulus", f"{seal.get('plain_modulus_bits')}-bit prime")
    lines = [
        f"  seal: N={N}, plain_modulus={plain}, coeff_modulus_bits={seal['coeff_modulus_bits']} "
        f"(log q = {sum(seal['coeff_modulus_bits'])})",
        f"  table: hash_func_count={h}, table_size={t['table_size']}, max_items_per_bin={max_bin}; "
        f"felts_per_item={felts} -> item {item_bits} bits ({bits_felt} per felt), "
        f"{per_bundle} items per ciphertext, {bundle_idx} bundle index(es)",
        f"  query: ps_low_degree={ps_low}, {len(q['query_powers'])} query powers {q['query_powers']}; "
        f"sender computes {len(targets)} powers, power-DAG depth {depth}",
        f"  query ciphertexts: {len(q['query_powers']) * bundle_idx}; "
        f"mean sender bin load h*n/table_size = {h * n_sender / t['table_size']:.1f} "
        f"(bin bundles per index >= {math.ceil(h * n_sender / t['table_size'] / max_bin)})",
        f"  log2 false-positive probability: {log2_fpp:.1f} per item, "
        f"{log2_fpp + math.log2(max(n_receiver, 1)):.1f} per query of {n_receiver}",
    ]
    if label_bytes:
        parts = math.ceil((label_bytes + nonce_bytes) * 8 / item_bits)
        lines.append(
            f"  labels: {label_bytes} B + {nonce_bytes} B nonce -> {parts} label polynomial(s) per bin bundle"
        )
    cf = cuckoo_log2_failure(n_receiver, t["table_size"], h)
    rule = "birthday bound" if h == 1 else "PSTY19 fit"
    if cf is None:
        lines.append(f"  receiver cuckoo failure: not estimated (h={h}, {n_receiver} item(s))")
    elif cf < -200:
        lines.append(f"  receiver cuckoo failure: log2 p < -200 ({rule} extrapolated to e = {t['table_size'] / n_receiver:.1f})")
    else:
        lines.append(f"  receiver cuckoo failure: log2 p = {cf:.1f} ({rule}, e = {t['table_size'] / n_receiver:.2f})")
    warn = []
    if not 80 <= item_bits <= 128:
        warn.append(f"item bit count {item_bits} is outside APSI's 80..128")
    if h == 1 and n_receiver > 1:
        warn.append("hash_func_count 1 is meant for a single receiver item; insertion may fail")
    if n_receiver > t["table_size"]:
        warn.append("more receiver items than cuckoo table slots")
    return lines, warn


# ---------------------------------------------------------------- the run


def import_apsi():
    try:
        import apsi
        import apsi.utils as apsi_utils
    except ImportError as e:
        sys.exit(
            f"cannot import the APSI wrapper ({e}).\n"
            "Install it with `pip install apsi`: on Linux this builds APSI from source and needs\n"
            "cmake >= 3.25, a C++17 compiler and network access (vcpkg and the APSI source are\n"
            "downloaded during the build)."
        )
    try:
        from importlib.metadata import version

        ver = version("apsi")
    except Exception:
        ver = "unknown"
    try:
        import _pyapsi

        ver += f" (extension {_pyapsi.__version__})"
    except (ImportError, AttributeError):
        pass
    return apsi, apsi_utils, ver


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def build_db(apsi, params_json, sender, label_bytes, nonce_bytes, max_build_seconds):
    """Returns (server, seconds, items inserted)."""
    t0 = time.perf_counter()
    if not label_bytes:
        server = apsi.UnlabeledServer()
        server.init_db(params_json)
        server.add_items(sender)  # one batch: APSI regenerates the caches once
        return server, time.perf_counter() - t0, len(sender)
    server = apsi.LabeledServer()
    server.init_db(params_json, max_label_length=label_bytes, nonce_byte_count=nonce_bytes)
    # LabeledServer.add_items is a Python loop over add_item; looping here gives progress.
    last = t0
    for i, item in enumerate(sender):
        server.add_item(item, label_for(i, label_bytes))
        now = time.perf_counter()
        if now - last >= 5:
            last = now
            rate = (i + 1) / (now - t0)
            print(
                f"    labelled insert: {i + 1}/{len(sender)} items, {rate:.1f}/s, "
                f"linear ETA {(len(sender) - i - 1) / rate:.0f} s (a lower bound: inserts slow down as bins fill)",
                file=sys.stderr,
                flush=True,
            )
        if max_build_seconds and now - t0 > max_build_seconds and i + 1 < len(sender):
            return server, now - t0, i + 1
    return server, time.perf_counter() - t0, len(sender)


def online(apsi, params_json, server, receiver, label_bytes):
    """One query: returns (result, {step: seconds}, {message: bytes})."""
    t, sz = {}, {}

    def step(name, f, *a):
        t0 = time.perf_counter()
        out = f(*a)
        t[name] = time.perf_counter() - t0
        return out

    # The client's constructor builds the SEAL context and generates the receiver's keys.
    client = step("client_init", apsi.LabeledClient if label_bytes else apsi.UnlabeledClient, params_json)
    req = step("oprf_request", client.oprf_request, receiver)
    resp = step("handle_oprf_request", server.handle_oprf_request, req)
    query = step("build_query", client.build_query, resp)
    answer = step("handle_query", server.handle_query, query)
    result = step("extract_result", client.extract_result, answer)
    sz["oprf_request"], sz["oprf_response"], sz["query"], sz["query_response"] = (
        len(req), len(resp), len(query), len(answer))
    return result, t, sz


def check(result, receiver, sender_index, label_bytes):
    """(ok, description) comparing the result with the plain intersection."""
    expected = {y: sender_index[y] for y in receiver if y in sender_index}
    if label_bytes:
        want = {y: label_for(i, label_bytes) for y, i in expected.items()}
        got = dict(result)
        missing = [y for y in want if y not in got]
        extra = [y for y in got if y not in want]
        wrong = [y for y in want if y in got and got[y] != want[y]]
        ok = not (missing or extra or wrong)
        return ok, f"{len(got)} found (expected {len(want)}), {len(missing)} missing, {len(extra)} extra, {len(wrong)} wrong labels"
    got = list(result)
    missing = [y for y in expected if y not in set(got)]
    extra = [y for y in got if y not in expected]
    ok = not (missing or extra) and len(got) == len(set(got))
    return ok, f"{len(got)} found (expected {len(expected)}), {len(missing)} missing, {len(extra)} extra"


def run_one(args, apsi, sender_log, n_receiver, label_bytes):
    n_sender = 1 << sender_log
    if args.params:
        with open(args.params) as f:
            params = json.load(f)
        pname = os.path.basename(args.params)
    else:
        pname = args.params_name or choose_params(n_sender, n_receiver, label_bytes)
        if pname is None:
            sys.exit(f"no embedded parameter set fits {n_sender} x {n_receiver}; pass --params FILE")
        params = APSI_PARAMS[pname]
    params_json = json.dumps(params)
    common = args.common if args.common is not None else round_half_away(
        args.overlap * min(n_sender, n_receiver))
    common = max(0, min(common, n_sender, n_receiver))
    tag = args.tag if args.tag is not None else random.randrange(100_000)
    mode = f"labelled {label_bytes} B" if label_bytes else "unlabelled"

    print(f"\n== sender 2^{sender_log} = {n_sender} items, receiver {n_receiver} items ({common} common), "
          f"{mode}, tag {tag}")
    print(f"  parameters: {pname}{'' if args.params else ' (embedded copy of APSI v0.12.0 parameters/' + pname + '.json)'}")
    print(f"  {params_json}")
    lines, warns = describe_params(params, n_sender, n_receiver, label_bytes, args.nonce_bytes)
    print("\n".join(lines))
    for w in warns:
        print(f"  warning: {w}")

    sender, receiver = make_sets(n_sender, n_receiver, common, tag)
    sender_index = {x: i for i, x in enumerate(sender)}

    server, build_s, inserted = build_db(apsi, params_json, sender, label_bytes, args.nonce_bytes,
                                         args.max_build_seconds)
    rss_build = peak_rss_mb()
    if inserted < n_sender:
        print(f"  database build stopped after {build_s:.0f} s at {inserted}/{n_sender} items "
              f"({inserted / build_s:.1f} items/s); no query run (see --max-build-seconds)")
        return {"sender_log": sender_log, "receiver": n_receiver, "label_bytes": label_bytes,
                "params": pname, "build_s": build_s, "inserted": inserted, "complete": False}
    print(f"  database build (init_db + add_items): {build_s:.3f} s, peak RSS so far {rss_build:.0f} MB")
    if args.save_db:
        t0 = time.perf_counter()
        server.save_db(args.save_db)
        print(f"  save_db: {time.perf_counter() - t0:.3f} s, {os.path.getsize(args.save_db) / 1e6:.3f} MB on disk")

    runs = []
    for _ in range(args.repeat):
        result, times, sizes = online(apsi, params_json, server, receiver, label_bytes)
        ok, what = check(result, receiver, sender_index, label_bytes)
        runs.append((times, sizes, ok, what))
    times = {k: statistics.median(r[0][k] for r in runs) for k in runs[0][0]}
    sizes, ok, what = runs[-1][1], all(r[2] for r in runs), runs[-1][3]

    agg = "median of %d" % args.repeat if args.repeat > 1 else "one query"
    print(f"  {'step (' + agg + ')':<30} {'party':<9} {'wall s':>9}   {'message':<15} {'bytes':>12}")
    rows = [
        ("client_init", "receiver", "", None),
        ("oprf_request", "receiver", "R→S oprf req", sizes["oprf_request"]),
        ("handle_oprf_request", "sender", "S→R oprf resp", sizes["oprf_response"]),
        ("build_query", "receiver", "R→S query", sizes["query"]),
        ("handle_query", "sender", "S→R response", sizes["query_response"]),
        ("extract_result", "receiver", "", None),
    ]
    for name, party, msg, b in rows:
        print(f"  {name:<30} {party:<9} {times[name]:>9.3f}   {msg:<15} {'' if b is None else b:>12}")
    sender_s = times["handle_oprf_request"] + times["handle_query"]
    receiver_s = times["client_init"] + times["oprf_request"] + times["build_query"] + times["extract_result"]
    up = sizes["oprf_request"] + sizes["query"]
    down = sizes["oprf_response"] + sizes["query_response"]
    print(f"  result: {'ok' if ok else 'MISMATCH'}: {what}; peak RSS {peak_rss_mb():.0f} MB (both parties)")
    return {"sender_log": sender_log, "receiver": n_receiver, "label_bytes": label_bytes, "params": pname,
            "build_s": build_s, "inserted": inserted, "complete": True, "steps_s": times, "bytes": sizes,
            "sender_online_s": sender_s, "receiver_s": receiver_s, "r_to_s_bytes": up, "s_to_r_bytes": down,
            "ok": ok, "check": what, "peak_rss_mb": peak_rss_mb(), "common": common, "tag": tag}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sender-log", type=int, default=16, help="sender set size as a power of two (default 16)")
    ap.add_argument("--receiver-count", type=int, default=1, help="receiver set size (default 1)")
    ap.add_argument("--label-bytes", type=int, default=0, help="label length in bytes; 0 = unlabelled (default)")
    ap.add_argument("--nonce-bytes", type=int, default=16, help="APSI label nonce bytes (default 16, APSI's)")
    ap.add_argument("--suite", action="store_true", help="run setwise's five workloads: " + ", ".join(
        f"2^{s}x{r}{' labelled %d B' % lab if lab else ''}" for s, r, lab in SUITE))
    ap.add_argument("--params", metavar="FILE", help="APSI JSON parameter file")
    ap.add_argument("--params-name", choices=sorted(APSI_PARAMS), help="embedded parameter set to use")
    ap.add_argument("--list-params", action="store_true", help="print the embedded parameter sets and exit")
    ap.add_argument("--threads", type=int, default=2, help="APSI thread pool size (default 2)")
    ap.add_argument("--overlap", type=float, default=0.5, help="common fraction of the smaller set (default 0.5)")
    ap.add_argument("--common", type=int, help="exact number of common items, instead of --overlap")
    ap.add_argument("--tag", type=int, help="item tag (default random in 0..99999, as setwise bench)")
    ap.add_argument("--repeat", type=int, default=1, help="online queries per workload; medians are printed")
    ap.add_argument("--save-db", metavar="FILE", help="also time save_db to FILE and print its size")
    ap.add_argument("--max-build-seconds", type=float, default=3600,
                    help="stop a labelled (item-by-item) build after this long; 0 = no limit (default 3600)")
    ap.add_argument("--log-level", default="WARNING", help="APSI log level (default WARNING)")
    ap.add_argument("--json", metavar="FILE", help="append one JSON line per workload to FILE")
    a = ap.parse_args()

    if a.list_params:
        for name, p in APSI_PARAMS.items():
            print(f"{name}: {json.dumps(p)}")
        return
    if a.repeat < 1 or a.receiver_count < 1 or a.sender_log < 0 or a.label_bytes < 0:
        ap.error("--repeat and --receiver-count must be >= 1, --sender-log and --label-bytes >= 0")

    apsi, apsi_utils, ver = import_apsi()
    try:
        apsi_utils.set_log_level(a.log_level)
    except Exception as e:  # log levels were renamed between wrapper versions
        print(f"(could not set APSI log level {a.log_level}: {e})")
    apsi_utils.set_thread_count(a.threads)
    print(f"APSI via PyAPSI {ver}, thread pool {apsi_utils.get_thread_count()}, both parties in one process, "
          f"no network time")

    workloads = SUITE if a.suite else [(a.sender_log, a.receiver_count, a.label_bytes)]
    results = [run_one(a, apsi, s, r, lab) for s, r, lab in workloads]

    print(f"\n{'sizes (S×R)':<14} {'mode':<14} {'build s':>9} {'sender s':>9} {'receiver s':>10} "
          f"{'S→R MB':>9} {'R→S MB':>9} {'result':>7} {'check':>6}")
    for r in results:
        mode = f"labelled {r['label_bytes']}B" if r["label_bytes"] else "unlabelled"
        size = f"2^{r['sender_log']}×{r['receiver']}"
        if not r["complete"]:
            print(f"{size:<14} {mode:<14} {'>' + format(r['build_s'], '.0f'):>9}  (build stopped at {r['inserted']} items)")
            continue
        found = r["check"].split(" ")[0]
        print(f"{size:<14} {mode:<14} {r['build_s']:>9.3f} {r['sender_online_s']:>9.3f} {r['receiver_s']:>10.3f} "
              f"{r['s_to_r_bytes'] / 1e6:>9.3f} {r['r_to_s_bytes'] / 1e6:>9.3f} {found:>7} {'ok' if r['ok'] else 'FAIL':>6}")
    if a.json:
        with open(a.json, "a") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    if not all(r.get("ok", True) for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
