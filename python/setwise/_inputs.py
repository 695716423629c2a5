"""Turning a party's items into native ``Keys``: lists, pandas, Arrow, and any frame or
column that speaks the Arrow PyCapsule interface (Polars, DuckDB, nanoarrow, …).

Keys are joined exactly as the CLI joins CSV fields, so a Python party and a CLI party
agree: one key column is its value's bytes (UTF-8 for text); several are each
length-prefixed. A row whose key is empty or null (all key fields, with several) takes
no part; a key on several rows is one item, and the result names every such row.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import Any, Union

from ._setwise import InputError, Keys

KeySpec = Union[str, Sequence[str], None]
Column = tuple[str, list[Any]]


def _optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _arrow_chunk(pa: ModuleType, array: Any) -> Any:
    """An Arrow array of a type the native side reads without copying (string/binary)."""
    t = array.type
    if pa.types.is_dictionary(t):
        return _arrow_chunk(pa, array.dictionary_decode())
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    ):
        return array
    if hasattr(pa.types, "is_binary_view") and pa.types.is_binary_view(t):
        return array.cast(pa.binary())
    # Numbers, dates, string views: their text, as a CSV file would hold it.
    return array.cast(pa.string())


def _arrow_column(pa: ModuleType, values: Any) -> Column:
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    return ("arrow", [_arrow_chunk(pa, c) for c in chunks])


def _python_value(v: Any) -> Any:
    """A key as the native side takes it: str, bytes or None. Numbers become their text
    (as in a CSV file), NaN (pandas' missing value) None; anything else is left for the
    native side to refuse by position."""
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return v


def _series_column(values: Any) -> Column:
    pa = _optional("pyarrow")
    if pa is not None:
        try:
            dtype = str(values.dtype)
            series = values if dtype in ("object", "string", "str") else values.astype("string")
            return _arrow_column(pa, pa.array(series, from_pandas=True))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            pass  # mixed str and bytes: go through Python objects
    return ("py", [_python_value(v) for v in values.tolist()])


def _column(values: Any) -> Column:
    pa = _optional("pyarrow")
    if pa is not None and isinstance(values, (pa.Array, pa.ChunkedArray)):
        return _arrow_column(pa, values)
    pd = _optional("pandas")
    if pd is not None and isinstance(values, (pd.Series, pd.Index)):
        return _series_column(pd.Series(values) if isinstance(values, pd.Index) else values)
    if hasattr(values, "__arrow_c_array__") and pa is not None:
        return _arrow_column(pa, pa.array(values))
    if hasattr(values, "__arrow_c_stream__"):  # a Polars Series
        if pa is None:
            raise InputError(
                f"a {type(values).__name__} is read through pyarrow (pip install 'pyarrow>=16')"
            )
        return _arrow_column(pa, pa.chunked_array(values))
    if isinstance(values, (str, bytes)):
        raise InputError("items must be a collection of keys, not one str or bytes")
    if not isinstance(values, Iterable):
        raise InputError(f"items must be a list, pandas or Arrow data, not {type(values).__name__}")
    return (
        "py",
        [v if v is None or isinstance(v, (str, bytes)) else _python_value(v) for v in values],
    )


def key_names(table: Any, key: KeySpec) -> list[str]:
    """The key columns of a table: `key` (one name or several), else the first column."""
    if hasattr(table, "column_names"):  # Arrow: .columns are the arrays themselves
        columns = [str(c) for c in table.column_names]
    else:
        columns = [str(c) for c in table.columns]
    names = [key] if isinstance(key, str) else list(key) if key is not None else columns[:1]
    missing = [n for n in names if n not in columns]
    if missing or not names:
        raise InputError(
            f"no key column {missing or names} (the columns are: {', '.join(columns)})"
        )
    return names


def arrow_frame(data: Any) -> Any:
    """`data` as a pyarrow Table when it is a frame of the Arrow PyCapsule interface
    (``__arrow_c_stream__`` of record batches: a Polars DataFrame, a DuckDB relation,
    pandas >= 2.2), else None (a column's stream, such as a Polars Series, is not one)."""
    if not hasattr(data, "__arrow_c_stream__"):
        return None
    pa = _optional("pyarrow")
    if pa is None:
        raise InputError(
            f"a {type(data).__name__} is read through pyarrow (pip install 'pyarrow>=16')"
        )
    try:
        reader = pa.RecordBatchReader.from_stream(data)
    except pa.ArrowInvalid:
        return None  # not a stream of record batches
    return reader.read_all()


def to_keys(items: Any, key: KeySpec = None) -> Keys:
    """Native keys from `items`: a list of str/bytes (None: no part), a pandas Series or
    Index, a pyarrow Array or ChunkedArray, a DataFrame / Arrow Table with `key`, or any
    frame or column with the Arrow PyCapsule interface (Polars, DuckDB)."""
    if isinstance(items, Keys):
        return items
    pd = _optional("pandas")
    pa = _optional("pyarrow")
    if pd is not None and isinstance(items, pd.DataFrame):
        return Keys([_column(items[n]) for n in key_names(items, key)])
    if pa is not None and isinstance(items, (pa.Table, pa.RecordBatch)):
        return Keys([_column(items.column(n)) for n in key_names(items, key)])
    table = arrow_frame(items)
    if table is not None:
        return Keys([_column(table.column(n)) for n in key_names(table, key)])
    if key is not None:
        raise InputError("key= names columns of a DataFrame or Arrow Table")
    return Keys([_column(items)])
