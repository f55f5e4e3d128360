"""Text from a KB made inert before a command prints it.

Names, literals and documents come from whoever wrote the graph. Printed raw, an escape sequence in one clears
the screen, sets the window title, plants an OSC 8 link or writes the clipboard; written to CSV, a cell that
starts with ``=`` is a formula to a spreadsheet. These two functions are what the CLI prints and writes instead.
"""

from __future__ import annotations

import re

#: C0 controls but tab and newline (which lay text out and drive nothing), DEL, and the C1 controls (0x9b is a
#: CSI of its own on many terminals).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: What a spreadsheet reads as a formula at a cell's start (with tab and carriage return, OWASP's list).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
#: A plain number ("-3", "+1.5e3") stays a number: it is data, not a formula.
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def visible(text: str) -> str:
    r"""``text`` with every control character shown as its escape, so a terminal prints it and obeys nothing.

    >>> visible("Ada\x1b]0;owned\x07 Lovelace")
    'Ada\\x1b]0;owned\\x07 Lovelace'
    >>> visible("two\nlines\tand a tab")
    'two\nlines\tand a tab'
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text) if _CONTROL.search(text) else text


def csv_cell(text: str) -> str:
    """``text`` as a CSV cell a spreadsheet will not run: a leading ``'`` before what reads as a formula.

    >>> csv_cell("=HYPERLINK(\\"http://x\\")"), csv_cell("-5"), csv_cell("@SUM(A1)"), csv_cell("Paris")
    ('\\'=HYPERLINK("http://x")', '-5', "'@SUM(A1)", 'Paris')
    """
    if text.startswith(_FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text
