"""Reading source files line by line, with file:line in every error.

Gzip is detected by suffix. Bytes that are not UTF-8 are an error naming the
file and line unless the caller asks to replace them (then they are counted).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

from ..errors import InputError
from ..records import ImportReport


def open_binary(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


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
    except (OSError, EOFError) as exc:
        raise InputError(f"cannot read file ({exc})", str(path)) from None
