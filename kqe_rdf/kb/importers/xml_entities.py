"""A bound on XML entity expansion, checked before an RDF/XML file reaches Oxigraph's parser.

Oxigraph expands the entities a document declares in its DOCTYPE while it reads the
declarations, without a limit, and a failed allocation aborts the process: a 1 KB
"billion laughs" file (ten entities, each ten copies of the one before) asks for
gigabytes. Here the declarations are read first and the size of every expansion is
computed, not performed; a file whose entities would expand beyond
:data:`MAX_DECLARED_BYTES`, or whose references would add more than
:data:`MAX_EXPANSION_BYTES` (plus 16 times the file's own size) to the text, is refused
with an error naming the file, the line and the entity. Flat entities, as ontology
editors write them (``<!ENTITY owl "http://www.w3.org/2002/07/owl#">``), pass.

>>> expansion_sizes('<!ENTITY a "ha"> <!ENTITY b "&a;&a;&a;">')
{'a': 2, 'b': 6}
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ...core.errors import InputError

#: Most text all declared entities may expand to together.
MAX_DECLARED_BYTES = 1 << 20
#: Most text the references in the document may add beyond 16 times the file's size.
MAX_EXPANSION_BYTES = 64 << 20
#: The DOCTYPE must end within this many bytes of the start.
MAX_PROLOG_BYTES = 4 << 20

_DOCTYPE = re.compile(rb"<!DOCTYPE\b")
_DECLARATION = re.compile(r"""<!ENTITY\s+(%\s+)?([^\s"'>]+)\s+(?:"([^"]*)"|'([^']*)'|(SYSTEM|PUBLIC)\b)""")
# Liberal on purpose: whatever the parser might take for an entity name is counted.
_REFERENCE = re.compile(r"&([^\s&;<>\"']{1,256});")
_REFERENCE_BYTES = re.compile(rb"&([^\s&;<>\"']{1,256});")


class EntityError(ValueError):
    """A declaration whose expansion is refused (the message says which entity and why)."""


def expansion_sizes(subset: str) -> dict[str, int]:
    """Expanded length of every general entity the DOCTYPE's internal subset declares (computed, not expanded)."""
    values: dict[str, str] = {}
    for match in _DECLARATION.finditer(subset):
        parameter, name, double, single, external = match.groups()
        if parameter or external:
            kind = "parameter entity" if parameter else "external entity"
            raise EntityError(f"the {kind} {name!r} is not supported (declare text entities only)")
        values.setdefault(name, double if double is not None else single)
    sizes: dict[str, int] = {}

    def size(name: str, path: tuple[str, ...]) -> int:
        if name in sizes:
            return sizes[name]
        if name in path:
            raise EntityError(f"entity {name!r} refers to itself (through {' → '.join(path)})")
        value = values[name]
        total = len(_REFERENCE.sub("", value).encode("utf-8"))
        for ref in _REFERENCE.findall(value):
            total += size(ref, (*path, name)) if ref in values else 1  # a predefined entity is one character
            if total > MAX_DECLARED_BYTES:
                raise EntityError(f"entity {name!r} would expand to more than {MAX_DECLARED_BYTES >> 20} MiB")
        sizes[name] = total
        return total

    for name in values:
        size(name, ())
    if sum(sizes.values()) > MAX_DECLARED_BYTES:
        raise EntityError(f"the declared entities would expand to {sum(sizes.values()):,} bytes, more than "
                          f"{MAX_DECLARED_BYTES >> 20} MiB")
    return sizes


def _internal_subset(head: bytes) -> tuple[str, int] | None:
    """The DOCTYPE's internal subset and the offset where the document continues, if it declares one."""
    start = _DOCTYPE.search(head)
    if start is None:
        return None
    opening = head.find(b"[", start.end())
    closing = head.find(b">", start.end())
    if opening < 0 or (0 <= closing < opening):
        return None  # a DOCTYPE without an internal subset declares no entities
    position, quote = opening + 1, None
    while position < len(head):
        byte = head[position : position + 1]
        if not quote and head.startswith((b"<!--", b"<?"), position):  # quotes in comments do not count
            ending = head.find(b"-->" if head.startswith(b"<!--", position) else b"?>", position)
            if ending < 0:
                break
            position = ending + 2
        elif quote:
            if byte == quote:
                quote = None
        elif byte in (b'"', b"'"):
            quote = byte
        elif byte == b"]":
            return head[opening + 1 : position].decode("utf-8", errors="replace"), position
        position += 1
    raise EntityError(f"the DOCTYPE does not end within the first {MAX_PROLOG_BYTES >> 20} MiB")


def _chunks(handle: BinaryIO, first: bytes) -> Iterator[bytes]:
    yield first
    while block := handle.read(1 << 20):
        yield block


def check_entity_expansion(path: Path, handle: BinaryIO) -> None:
    """Refuse an RDF/XML file whose entities would expand beyond the limits; reads ``handle`` to its end."""
    head = handle.read(MAX_PROLOG_BYTES)
    try:
        found = _internal_subset(head)
        if found is None:
            return
        subset, end = found
        sizes = expansion_sizes(subset)
    except EntityError as exc:
        line = head[: head.find(b"<!DOCTYPE")].count(b"\n") + 1
        raise InputError(f"refused: {exc}", f"{path}:{line}") from None
    if not sizes:
        return
    line = head[: head.find(b"<!DOCTYPE")].count(b"\n") + 1
    added, read, tail = 0, end, b""
    for block in _chunks(handle, head[end:]):
        text = tail + block
        cut = max(0, len(text) - 256)  # a reference that may continue in the next block is counted with it
        added += sum(sizes.get(m.group(1).decode("utf-8", "replace"), 0) for m in _REFERENCE_BYTES.finditer(text)
                     if m.start() < cut)
        tail, read = text[cut:], read + len(block)
    added += sum(sizes.get(m.group(1).decode("utf-8", "replace"), 0) for m in _REFERENCE_BYTES.finditer(tail))
    if added > MAX_EXPANSION_BYTES + 16 * read:
        raise InputError(f"refused: entity references would add {added:,} bytes of text, more than the "
                         f"{(MAX_EXPANSION_BYTES + 16 * read) >> 20} MiB allowed for this file (an entity "
                         "expansion attack?)", f"{path}:{line}")
