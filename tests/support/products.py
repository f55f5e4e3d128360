"""The product KB of the tests (a mini STaRK-Amazon) as JSON Lines, and a larger generated one."""

from __future__ import annotations

import json
from pathlib import Path

# Brands, categories and products with descriptions and typed edges. B008 and B009 are the
# same lens cap listed twice (identical documents, so their scores tie). The last edge points
# at a product that is not in the file and is skipped.
PRODUCTS = """\
{"kind": "node", "id": "nikon", "type": "Brand", "name": "Nikon", "fields": {"description": "Japanese maker of cameras, binoculars and F-mount and Z-mount lenses."}}
{"kind": "node", "id": "canon", "type": "Brand", "name": "Canon", "fields": {"description": "Japanese maker of EOS cameras, printers and EF lenses."}}
{"kind": "node", "id": "sony", "type": "Brand", "name": "Sony", "fields": {"description": "Electronics company making Alpha mirrorless cameras and E-mount lenses."}}
{"kind": "node", "id": "manfrotto", "type": "Brand", "name": "Manfrotto", "fields": {"description": "Italian maker of tripods, heads and lighting supports."}}
{"kind": "node", "id": "dslr", "type": "Category", "name": "Digital SLR Cameras"}
{"kind": "node", "id": "mirrorless", "type": "Category", "name": "Mirrorless Cameras"}
{"kind": "node", "id": "lenses", "type": "Category", "name": "Camera Lenses"}
{"kind": "node", "id": "supports", "type": "Category", "name": "Tripods and Supports"}
{"kind": "node", "id": "B001", "type": "Product", "name": "Nikon D500 DSLR Camera Body", "aliases": ["D500"], "fields": {"description": "APS-C DSLR with a 10 fps burst and 153-point autofocus that tracks birds in flight; weather sealed for wildlife photography in the field.", "compatibility": "Takes Nikon F-mount lenses."}}
{"kind": "node", "id": "B002", "type": "Product", "name": "Canon EOS 90D DSLR Camera", "fields": {"description": "32.5 MP DSLR for travel and family photos with a vari-angle touchscreen.", "compatibility": "Takes Canon EF and EF-S lenses."}}
{"kind": "node", "id": "B003", "type": "Product", "name": "Sony Alpha 7 IV Mirrorless Camera", "aliases": ["A7 IV", "ILCE-7M4"], "xrefs": ["EAN:4548736133730"], "fields": {"description": "Full-frame mirrorless camera for 4K video and vlogging, with eye autofocus.", "compatibility": "Takes Sony E-mount lenses."}}
{"kind": "node", "id": "B004", "type": "Product", "name": "Nikon Z fc Mirrorless Camera", "fields": {"description": "Retro-styled mirrorless camera with film-era dials for street photography.", "compatibility": "Takes Nikon Z-mount lenses."}}
{"kind": "node", "id": "B005", "type": "Product", "name": "Nikon AF-S 200-500mm f/5.6E Telephoto Zoom Lens", "fields": {"description": "Super-telephoto zoom lens for sports and distant subjects, with vibration reduction.", "compatibility": "Nikon F-mount lens."}}
{"kind": "node", "id": "B006", "type": "Product", "name": "Canon EF 50mm f/1.8 STM Lens", "aliases": ["nifty fifty"], "fields": {"description": "Small and light prime lens for portraits with a creamy background blur.", "compatibility": "Canon EF-mount lens."}}
{"kind": "node", "id": "B007", "type": "Product", "name": "Manfrotto Befree Travel Tripod", "fields": {"description": "Aluminium travel tripod that folds to 40 cm and holds 8 kg, with a ball head."}}
{"kind": "node", "id": "B008", "type": "Product", "name": "Lens Cap 52mm", "fields": {"description": "Snap-on front lens cap."}}
{"kind": "node", "id": "B009", "type": "Product", "name": "Lens Cap 52mm", "fields": {"description": "Snap-on front lens cap."}}
{"kind": "edge", "head": "B001", "relation": "hasBrand", "tail": "nikon"}
{"kind": "edge", "head": "B002", "relation": "hasBrand", "tail": "canon"}
{"kind": "edge", "head": "B003", "relation": "hasBrand", "tail": "sony"}
{"kind": "edge", "head": "B004", "relation": "hasBrand", "tail": "nikon"}
{"kind": "edge", "head": "B005", "relation": "hasBrand", "tail": "nikon"}
{"kind": "edge", "head": "B006", "relation": "hasBrand", "tail": "canon"}
{"kind": "edge", "head": "B007", "relation": "hasBrand", "tail": "manfrotto"}
{"kind": "edge", "head": "B001", "relation": "inCategory", "tail": "dslr"}
{"kind": "edge", "head": "B002", "relation": "inCategory", "tail": "dslr"}
{"kind": "edge", "head": "B003", "relation": "inCategory", "tail": "mirrorless"}
{"kind": "edge", "head": "B004", "relation": "inCategory", "tail": "mirrorless"}
{"kind": "edge", "head": "B005", "relation": "inCategory", "tail": "lenses"}
{"kind": "edge", "head": "B006", "relation": "inCategory", "tail": "lenses"}
{"kind": "edge", "head": "B007", "relation": "inCategory", "tail": "supports"}
{"kind": "edge", "head": "B005", "relation": "compatibleWith", "tail": "B001"}
{"kind": "edge", "head": "B006", "relation": "compatibleWith", "tail": "B002"}
{"kind": "edge", "head": "B006", "relation": "compatibleWith", "tail": "B999"}
"""


def write_jsonl(path: Path, text: str | bytes) -> Path:
    """Write a JSON Lines fixture (text, or raw bytes for encoding tests) and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def generated_products(count: int) -> str:
    """A larger KB (products in a chain of related items) whose build takes a noticeable while."""
    lines = []
    for i in range(count):
        words = " ".join(f"w{(i * 7 + j) % 997}" for j in range(40))
        lines.append(json.dumps({"kind": "node", "id": f"P{i}", "type": "Product", "name": f"Product {i}",
                                 "fields": {"description": f"Generated product {i}: {words}"}}))
        if i:
            lines.append(json.dumps({"kind": "edge", "head": f"P{i}", "relation": "relatedTo", "tail": f"P{i // 2}"}))
    return "\n".join(lines) + "\n"
