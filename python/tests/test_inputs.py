"""pandas and Arrow inputs with awkward keys: the same items as the CLI reads from CSV."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

import setwise
from conftest import free_port, pair

AWKWARD = ["Zoë@example.com", 'say "hi"', "a,b", " padded ", "日本", "", "tab\there", "a,b"]


def test_awkward_keys_nulls_and_duplicates() -> None:
    df = pd.DataFrame({"key": [*AWKWARD, None], "row": range(len(AWKWARD) + 1)})
    keys = setwise.keys(df, key="key")
    # The empty key and the null take no part; "a,b" twice is one item.
    assert (keys.rows, len(keys), keys.empty_rows, keys.repeated_rows) == (9, 6, 2, 1)
    theirs = pa.chunked_array([["a,b", "日本"], [" padded ", "nope", ""]])
    s, r = pair(
        lambda a: setwise.sender(theirs, listen=a),
        lambda a: setwise.receiver(df, key="key", connect=a),
    )
    got = r.rows(df)
    assert list(got["row"]) == [2, 3, 4, 7]  # every row of a matching key, input order
    assert s.items is None


@pytest.mark.parametrize(
    "items",
    [
        ["x1", "x2", "x3"],
        [b"x1", b"x2", b"x3"],
        pd.Series(["x1", "x2", "x3"]),
        pd.Series(["x1", "x2", "x3"], dtype="string"),
        pd.Index(["x1", "x2", "x3"]),
        pa.array(["x1", "x2", "x3"]),
        pa.array(["x1", "x2", "x3"], pa.large_string()),
        pa.array([b"x1", b"x2", b"x3"], pa.binary()),
        pa.array(["x1", "x2", "x3"]).dictionary_encode(),
        pa.chunked_array([["x1"], ["x2", "x3"]]),
        pa.table({"k": ["x1", "x2", "x3"]}),
    ],
    ids=lambda v: type(v).__name__,
)
def test_every_input_kind_gives_the_same_items(items: object) -> None:
    _, r = pair(
        lambda a: setwise.sender(["x2", "x3", "x4"], listen=a),
        lambda a: setwise.receiver(items, connect=a),
    )
    assert r.indices == [1, 2]


def test_numbers_are_keys_by_their_text() -> None:
    df = pd.DataFrame({"id": [1, 2, 3, None]})
    _, r = pair(
        lambda a: setwise.sender(["2", "3.0", "3"], listen=a),
        lambda a: setwise.receiver(pd.Series([1, 2, 3], dtype="int64"), connect=a),
    )
    assert r.indices == [1, 2]
    assert setwise.keys(df, key="id").empty_rows == 1  # NaN / None: no part


def test_several_key_columns_match_the_cli(tmp_path: Path, setwise_cli: Path) -> None:
    """A Python receiver with two key columns against a CLI sender reading CSV."""
    csv = tmp_path / "s.csv"
    csv.write_text('first,last,n\nAnn,"Lee, Jr",1\nBo,Ng,2\n"a,b",c,3\n,,4\n', encoding="utf-8")
    df = pd.DataFrame({"first": ["a,b", "Ann", "a", "Bo"], "last": ["c", "Lee, Jr", "b,c", "Ng "]})
    addr = free_port()
    sender = subprocess.Popen(
        [str(setwise_cli), "sender", "--listen", addr, "--input", str(csv), "--key", "first,last"],
        stderr=subprocess.PIPE,
        text=True,
    )
    r = setwise.receiver(df, key=["first", "last"], connect=addr)
    _, err = sender.communicate(timeout=60)
    assert sender.returncode == 0, err
    # ("a", "b,c") is not ("a,b", "c"); "Ng " is not "Ng".
    assert r.indices == [0, 1]


def test_bad_inputs_are_input_errors() -> None:
    with pytest.raises(setwise.InputError, match="no key column"):
        setwise.keys(pd.DataFrame({"a": ["x"]}), key="email")
    with pytest.raises(setwise.InputError, match="not one str"):
        setwise.keys("abc")
    with pytest.raises(TypeError, match="key 1 is a dict"):
        setwise.keys(["x", {}])
    with pytest.raises(setwise.InputError, match="key= names columns"):
        setwise.keys(["x"], key="k")


def test_polars_and_duckdb_frames_and_columns() -> None:
    """Frames and columns of the Arrow PyCapsule interface, without conversions: the
    same rows as the plain intersection, given back as the kind of frame they came in."""
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    emails = ["a@x", "b@x", None, "Zoë@x", "c@x", "b@x"]
    ours = pl.DataFrame({"email": emails, "n": range(len(emails))})
    theirs = ["b@x", "Zoë@x", "q@x"]
    expected = [i for i, e in enumerate(emails) if e in theirs]
    _, r = pair(
        lambda a: setwise.sender(pl.Series("k", theirs), listen=a),
        lambda a: setwise.receiver(ours, key="email", connect=a),
    )
    rows = r.rows(ours)
    assert isinstance(rows, pl.DataFrame)
    assert rows["n"].to_list() == expected == r.indices
    assert rows.schema == ours.schema
    con = duckdb.connect()
    relation = con.sql(
        "select * from (values (0, 'a@x'), (1, 'b@x'), (2, 'Zoë@x'), (3, null)) t(n, email)"
        " order by n"
    )
    _, r = pair(
        lambda a: setwise.sender(pl.DataFrame({"k": theirs}), listen=a),
        lambda a: setwise.receiver(relation, key="email", connect=a),
    )
    assert r.indices == [1, 2]
    got = r.rows(relation)
    assert isinstance(got, duckdb.DuckDBPyRelation)
    assert got.fetchall() == [(1, "b@x"), (2, "Zoë@x")]
