"""What every rejected input must look like from the command line, and how a KB is proved untouched.

``outcome(result, source)`` checks one CLI run on a malformed file: status 0 (accepted) or 2 with
one line ``error: …`` naming the file (``file:line`` where the fault is on a line) or the
option at fault, never a traceback or an uncaught exception. ``kb_digest(path)`` hashes every
file of a KB folder (names and bytes), so a failed command can be shown to have changed nothing.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

#: Options a message may name instead of a file.
PARAMETERS = ("--option", "--text-property", "--entity-column", "--name", "--delimiter", "--kb", "--limit",
              "QUERYSET", "PATHS")


def kb_digest(path: Path) -> str:
    """SHA-256 over the relative path and the bytes of every file under ``path`` (lock files left out)."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".lock") or name == "LOCK":
                continue
            file = Path(root) / name
            digest.update(str(file.relative_to(path)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def one_line_error(result) -> str:
    """The message of a refused command: exit status 2, one ``error:`` line on stderr, no traceback."""
    assert result.exit_code == 2, f"exit {result.exit_code}: {result.output[-2000:]}\n{result.exception!r}"
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:") or line.startswith("Error:")]
    assert len(lines) == 1, result.stderr[-2000:]
    return lines[0]


def names_the_place(message: str, source: Path | list[Path] | None, line: bool = False) -> bool:
    """Whether ``message`` says where the fault is: the file, or one of the files (with ``:line`` when
    ``line``), or an option."""
    if any(p in message for p in PARAMETERS):
        return True
    sources = [] if source is None else source if isinstance(source, list) else [source]
    if line:
        return any(re.search(re.escape(s.name) + r":\d+", message) for s in sources)
    return any(s.name in message for s in sources)


def outcome(result, source: Path | list[Path] | None, line: bool = False) -> str:
    """``"accepted"`` or ``"refused"``; fails on anything else (a traceback, a crash, a vague message)."""
    if result.exit_code == 0:
        assert result.exception is None, repr(result.exception)
        return "accepted"
    message = one_line_error(result)
    assert names_the_place(message, source, line), f"{message!r} does not name {source} or an option"
    return "refused"
