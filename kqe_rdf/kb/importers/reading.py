"""Reading source files line by line, with file:line in every error.

Gzip is detected by suffix; a truncated or corrupt one is an error naming the
file. Bytes that are not UTF-8 are an error naming the file and line unless
the caller asks to replace them (then they are counted). JSON lines are read
by :func:`parse_json`, which refuses what Python's reader would turn into a
traceback or a silent surprise.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

from ...core.errors import InputError
from ..records import ImportReport


def open_binary(path: Path):
    """The file's bytes, gunzipped when it ends in .gz (read through a buffer: gzip's own line reading is
    Python, and took twice as long)."""
    return io.BufferedReader(gzip.open(path, "rb"), 1 << 20) if path.suffix == ".gz" else open(path, "rb")


def numbered_lines(path: Path, report: ImportReport | None = None, replace: bool = False) -> Iterator[tuple[int, str]]:
    """(line number, text without the newline) for every line of a text file."""
    if not path.is_file():
        raise InputError("no such file", str(path))
    try:
        with open_binary(path) as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    if not replace:
                        raise InputError(
                            f"not UTF-8 text (byte {exc.start}: {raw[exc.start:exc.start + 1]!r}); "
                            "re-encode the file as UTF-8",
                            f"{path}:{number}",
                        ) from None
                    text = raw.decode("utf-8", errors="replace")
                    if report is not None:
                        report.warn(f"{path}:{number}: bytes that are not UTF-8 were replaced")
                yield number, text.rstrip("\r\n")
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"cannot read file ({_read_error(exc)})", str(path)) from None


def _read_error(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return f"the compressed file ends too early, it was probably cut short: {exc}"
    if isinstance(exc, zlib.error):
        return f"corrupt compressed data: {exc}"
    return str(exc)


#: A ``\uD800``-``\uDFFF`` escape: the only way a JSON line read as UTF-8 can carry a lone surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


class JsonSyntaxError(InputError):
    """A line that is not JSON at all (some readers then try another notation)."""


class _Refused(ValueError):
    """A JSON value parse_json refuses (raised from the decoder's hooks)."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {text[:40]} is out of range")
    return value


def _constant(name: str) -> float:
    raise _Refused(f"{name} is not a JSON number")


def parse_json(line: str, where: str) -> object:
    """One JSON value, or an :class:`InputError` naming ``where`` for what Python's reader gets wrong.

    Refused: malformed JSON, nesting deeper than the interpreter's recursion limit, integers
    longer than Python converts (4,300 digits), ``NaN``/``Infinity`` and numbers that overflow to
    infinity (``1e999999``), and lone surrogates (``"\\ud800"``), which no UTF-8 store can hold.

    >>> parse_json('{"id": 7}', "kb.jsonl:1")
    {'id': 7}
    >>> parse_json('{"id": 1e999999}', "kb.jsonl:2")
    Traceback (most recent call last):
    kqe_rdf.core.errors.InputError: kb.jsonl:2: the number 1e999999 is out of range
    """
    try:
        value = json.loads(line, parse_float=_finite, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise JsonSyntaxError(f"not valid JSON ({exc.msg} at column {exc.colno})", where) from None
    except RecursionError:
        raise InputError("JSON nested too deeply (Python reads about 1,000 levels at most)", where) from None
    except _Refused as exc:
        raise InputError(str(exc), where) from None
    except ValueError as exc:  # int() refusing more than sys.get_int_max_str_digits() digits
        raise InputError(f"a number too long to read ({str(exc).split(';')[0]})", where) from None
    if _SURROGATE_ESCAPE.search(line):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InputError(f"a string holds a lone surrogate escape ({exc.object[exc.start:exc.end]!r}), "
                             "which is not a character", where) from None
    return value


class CsvFile:
    """A CSV file read one record at a time (files of gigabytes stay out of memory).

    ``columns`` maps the header's names to their positions; iterating yields
    ``("file:line", cells)`` where the line is where the record starts (a quoted
    cell may span lines). A record with another number of cells than the header
    is an error naming its line; blank lines are skipped.
    """

    def __init__(self, path: Path, required: tuple[str, ...] = (), report: ImportReport | None = None) -> None:
        self.path = Path(path)
        self._line = 0
        csv.field_size_limit(max(csv.field_size_limit(), 1 << 27))  # long feature texts pass the 128 KiB default
        self._reader = csv.reader(self._lines(report))
        try:
            header = next(self._reader, None)
        except csv.Error as exc:
            raise InputError(f"malformed CSV header ({exc})", f"{self.path}:1") from None
        if not header:
            raise InputError("empty file; expected a CSV header line", str(self.path))
        self.columns = {name.strip(): i for i, name in enumerate(header)}
        missing = [c for c in required if c not in self.columns]
        if missing:
            raise InputError(f"the CSV header lacks the column(s) {', '.join(missing)}; found "
                             f"{', '.join(self.columns)}", f"{self.path}:1")

    def _lines(self, report: ImportReport | None) -> Iterator[str]:
        for number, text in numbered_lines(self.path, report):
            self._line = number
            yield text + "\n"

    def __iter__(self) -> Iterator[tuple[str, list[str]]]:
        width = len(self.columns)
        start = self._line + 1
        while True:
            try:
                cells = next(self._reader, None)
            except csv.Error as exc:
                raise InputError(f"malformed CSV ({exc})", f"{self.path}:{start}") from None
            if cells is None:
                return
            where = f"{self.path}:{start}"
            start = self._line + 1
            if not cells:
                continue
            if len(cells) != width:
                raise InputError(f"expected {width} cells ({','.join(self.columns)}), found {len(cells)}", where)
            yield where, cells
