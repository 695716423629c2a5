"""Parquet and Arrow IPC files through the CLI: written by pyarrow and read by the CLI,
written by the CLI and read back by pyarrow, against the plain computation."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import feather

from conftest import free_port

AWKWARD = ["Zoë@example.com", 'say "hi"', "a,b", " padded ", "日本", "", "tab\there", None]


def run_pair(
    cli: Path,
    sender: list[str],
    receiver: list[str],
    commands: tuple[str, str] = ("sender", "receiver"),
) -> str:
    """Runs a listening CLI command (a sender, a judge) and a connecting one (a
    receiver, a client authorizing) against each other; returns the second's log."""
    addr = free_port()
    s = subprocess.Popen(
        [str(cli), commands[0], "--listen", addr, *sender], stderr=subprocess.PIPE, text=True
    )
    r = subprocess.run(
        [str(cli), commands[1], "--connect", addr, *receiver],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    _, err = s.communicate(timeout=60)
    assert s.returncode == 0, err
    assert r.returncode == 0, r.stderr
    return r.stderr


def read_stream(path: Path) -> Any:
    return pa.ipc.open_stream(path).read_all()


def read_file(path: Path) -> Any:
    return pa.ipc.open_file(path).read_all()


def read_parquet(path: Path) -> Any:
    return pq.read_table(path)


def test_a_pyarrow_parquet_pair_gives_the_matching_rows_with_their_types(
    tmp_path: Path, setwise_cli: Path
) -> None:
    # The sender keys by a struct's field, the receiver by a dictionary-encoded column
    # with nulls, repeats, unicode and quotes; the receiver's other columns are typed.
    theirs = pa.table(
        {
            "user": pa.array(
                [{"email": k} for k in ["a,b", "日本", " padded ", "nope", "", 'say "hi"']]
            ),
            "n": pa.array(range(6), pa.int16()),
        }
    )
    ours = pa.table(
        {
            "email": pa.array([*AWKWARD, "a,b"]).dictionary_encode(),
            "amount": pa.array([1.5, None, 3.25, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]),
            "when": pa.array(range(9), pa.int64()).cast(pa.timestamp("ms")),
            "tags": pa.array([["x"], [], None, ["y", "z"], ["é"], [], ["t"], [], ["last"]]),
        }
    )
    pq.write_table(theirs, tmp_path / "theirs.parquet", compression="zstd")
    pq.write_table(ours, tmp_path / "ours.parquet")
    out = tmp_path / "matches.parquet"
    log = run_pair(
        setwise_cli,
        ["--input", str(tmp_path / "theirs.parquet"), "--key", "user.email"],
        ["--input", str(tmp_path / "ours.parquet"), "--key", "email", "--output", str(out)],
    )
    assert "2 rows with an empty key skipped, 1 rows repeat an earlier key" in log
    sender_keys = {r["email"] for r in theirs.column("user").to_pylist() if r["email"]}
    plain = ours.filter(
        pc.is_in(ours.column("email").cast(pa.string()), pa.array(sorted(sender_keys)))
    )
    got = pq.read_table(out)
    assert got.schema == plain.schema
    # Equal values (a dictionary's encoding may differ once written again).
    assert got.to_pylist() == plain.to_pylist()
    assert got.column("email").to_pylist() == ['say "hi"', "a,b", " padded ", "日本", "a,b"]


def test_integer_keys_match_a_csv_and_cli_parquet_reads_back(
    tmp_path: Path, setwise_cli: Path
) -> None:
    # The sender's integers in an Arrow IPC file match the receiver's CSV text; the
    # receiver's CSV rows are written as Parquet, which pyarrow reads as strings.
    feather.write_feather(
        pa.table({"id": pa.array([-7, 42, 10**18, 3], pa.int64())}), tmp_path / "s.arrow"
    )
    (tmp_path / "r.csv").write_text(
        'id,name\n42,"Lee, Jr"\n007,x\n-7,日本\n1000000000000000000,big\n42,again\n',
        encoding="utf-8",
    )
    out = tmp_path / "m.parquet"
    run_pair(
        setwise_cli,
        ["--input", str(tmp_path / "s.arrow")],
        ["--input", str(tmp_path / "r.csv"), "--output", str(out)],
    )
    got = pq.read_table(out)
    assert got.to_pylist() == [
        {"id": "42", "name": "Lee, Jr"},
        {"id": "-7", "name": "日本"},
        {"id": "1000000000000000000", "name": "big"},
        {"id": "42", "name": "again"},
    ]
    # That Parquet file, read by the CLI again, out as an Arrow IPC stream and file.
    for ext, read in [
        ("arrows", read_stream),
        ("arrow", read_file),
    ]:
        again = tmp_path / f"again.{ext}"
        run_pair(
            setwise_cli,
            ["--input", str(tmp_path / "s.arrow")],
            ["--input", str(out), "--output", str(again)],
        )
        assert read(again).equals(got)


def test_many_row_groups_line_up_with_their_keys(tmp_path: Path, setwise_cli: Path) -> None:
    # Row groups of 1000 rows, each with its own dictionary, read in batches across them.
    n = 5000
    ours = pa.table(
        {
            "k": pa.array([f"k{i % 3000}" for i in range(n)]).dictionary_encode(),
            "row": pa.array(range(n), pa.int64()),
        }
    )
    pq.write_table(ours, tmp_path / "r.parquet", row_group_size=1000)
    theirs = [f"k{i}" for i in range(0, 6000, 7)]
    (tmp_path / "s.txt").write_text("\n".join(theirs) + "\n", encoding="utf-8")
    plain = ours.filter(pc.is_in(ours.column("k").cast(pa.string()), pa.array(theirs)))
    for ext, read in [
        ("parquet", read_parquet),
        ("arrow", read_file),
    ]:
        out = tmp_path / f"m.{ext}"
        run_pair(
            setwise_cli,
            ["--input", str(tmp_path / "s.txt")],
            ["--input", str(tmp_path / "r.parquet"), "--output", str(out)],
        )
        got = read(out)
        assert got.column("row").to_pylist() == plain.column("row").to_pylist()
        assert got.column("k").to_pylist() == plain.column("k").to_pylist()


def test_labels_from_parquet_come_back_in_parquet(tmp_path: Path, setwise_cli: Path) -> None:
    db = tmp_path / "db"
    pq.write_table(
        pa.table({"email": ["a@x", "b@x", "c@x"], "tier": pa.array([1, 2, 3], pa.int8())}),
        tmp_path / "db.parquet",
    )
    subprocess.run(
        [
            *(str(setwise_cli), "db", "build", "--input", str(tmp_path / "db.parquet")),
            *("--label", "tier", "--params", "64K-256", "--out", str(db)),
        ],
        check=True,
        capture_output=True,
    )
    pq.write_table(pa.table({"email": ["c@x", "z@x", "a@x"]}), tmp_path / "q.parquet")
    out = tmp_path / "labelled.parquet"
    run_pair(
        setwise_cli,
        ["--protocol", "unbalanced", "--db", str(db)],
        ["--protocol", "unbalanced", "--input", str(tmp_path / "q.parquet"), "--output", str(out)],
    )
    assert pq.read_table(out).to_pylist() == [
        {"email": "c@x", "tier": "3"},
        {"email": "a@x", "tier": "1"},
    ]


def test_damaged_and_unkeyable_files_are_clear_errors(tmp_path: Path, setwise_cli: Path) -> None:
    pq.write_table(pa.table({"k": ["a", "b"], "f": [1.0, 2.0]}), tmp_path / "ok.parquet")
    data = (tmp_path / "ok.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    for args, message in [
        (["--input", str(tmp_path / "cut.parquet")], "cut.parquet: not a readable Parquet file"),
        (["--input", str(tmp_path / "ok.parquet"), "--key", "f"], "floats are not keys"),
        (["--input", str(tmp_path / "ok.parquet"), "--key", "x"], "no column named 'x'"),
    ]:
        r = subprocess.run(
            [str(setwise_cli), "sender", "--listen", free_port(), *args],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 2, r.stderr
        assert message in r.stderr


def test_staged_runs_and_the_judge_read_parquet(tmp_path: Path, setwise_cli: Path) -> None:
    cli = str(setwise_cli)
    pq.write_table(pa.table({"id": pa.array([5, 6, 7, 8], pa.int32())}), tmp_path / "s.parquet")
    pq.write_table(
        pa.table({"id": ["7", "9", "5"], "when": pa.array([1, 2, 3], pa.date32())}),
        tmp_path / "r.parquet",
    )
    key = tmp_path / "exchange.key"
    subprocess.run([cli, "stage", "keygen", str(key)], check=True, capture_output=True)
    common = [
        *("stage", "run", "--protocol", "vole", "--exchange", str(tmp_path / "ex")),
        *("--run-id", "r1", "--exchange-key", str(key), "--wait-timeout", "120"),
    ]
    sender = subprocess.Popen(
        [
            *(cli, *common, "--role", "sender", "--input", str(tmp_path / "s.parquet")),
            *("--workdir", str(tmp_path / "ws")),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    out = tmp_path / "staged.parquet"
    subprocess.run(
        [
            *(cli, *common, "--role", "receiver", "--input", str(tmp_path / "r.parquet")),
            *("--workdir", str(tmp_path / "wr"), "--output", str(out)),
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    _, err = sender.communicate(timeout=120)
    assert sender.returncode == 0, err
    got = pq.read_table(out)
    assert got.schema.field("when").type == pa.date32()
    assert got.column("id").to_pylist() == ["7", "5"]

    # A judge's allow-list and a client's items from Parquet.
    pq.write_table(pa.table({"email": ["a@x", "b@x", "c@x"]}), tmp_path / "allow.parquet")
    pq.write_table(
        pa.table({"who": [{"email": e} for e in ["a@x", "z@x", "c@x"]]}), tmp_path / "ask.parquet"
    )
    log = run_pair(
        setwise_cli,
        [
            *("--allow", str(tmp_path / "allow.parquet"), "--sessions", "1"),
            *("--secret-key", str(tmp_path / "j.key"), "--public-key", str(tmp_path / "j.pub")),
            "--insecure-no-tls",
        ],
        [
            *("--input", str(tmp_path / "ask.parquet"), "--key", "who.email"),
            *("--client-id", "lab", "--insecure-no-tls"),
            *("--credentials", str(tmp_path / "creds.bin")),
        ],
        ("judge", "authorize"),
    )
    assert "2 of 3 items signed" in log and "refused: z@x" in log
