"""A generated corpus of malformed inputs for the importers and the CLI (fixed seed, reproducible).

Every case is a small valid file of one family, damaged by one or two mutations drawn from
a seeded ``random.Random``: bytes cut, flipped, inserted or deleted, lines duplicated or
swapped, a JSON value replaced by a value of another kind, or a hostile token planted
(deep nesting, a 5,000-digit number, ``1e999999``, ``NaN``, a lone surrogate, a BOM, a NUL,
invalid UTF-8, nested XML entities, an over-long literal), sometimes gzipped whole or cut.

Families and the command each runs (``{kb}`` is the target KB, ``{0}`` the first file):

- ``jsonl``: ``kb build jsonl {0}``
- ``turtle``, ``ntriples``, ``rdfxml``: ``kb build rdf {0}``
- ``table``: ``tables add {0} --entity-column name --replace``
- ``stark``, ``trec``, ``metaqa``, ``phenopackets``, ``scifact``: ``eval <set> {0} [{1}] --limit 5``
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass, field

SEED = 15
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"

JSONL = [
    {"kind": "node", "id": "nikon", "type": "Brand", "name": "Nikon", "fields": {"description": "Japanese maker of cameras."}},
    {"kind": "node", "id": "B001", "type": "Product", "name": "Nikon D500", "aliases": ["D500"],
     "fields": {"description": "APS-C DSLR for wildlife.", "compatibility": "F-mount lenses"}, "xrefs": ["EAN:1"]},
    {"kind": "node", "id": "B007", "type": "Product", "name": "Travel Tripod", "iri": "http://example.org/tripod",
     "fields": {"description": "Aluminium travel tripod."}},
    {"kind": "edge", "head": "B001", "relation": "hasBrand", "tail": "nikon", "qualifiers": {"since": 2016}},
    {"kind": "edge", "head": "B007", "relation": "relatedTo", "tail": "B001"},
]
TURTLE = f"""@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix ex: <http://example.org/> .
ex:tripod rdfs:label "Travel tripod"@en ; rdfs:comment \"\"\"Aluminium, folds to 40 cm.\"\"\" ; ex:fits ex:d500 .
ex:d500 a ex:Camera ; rdfs:label "Nikon D500" .
"""
NTRIPLES = f"""<http://example.org/tripod> <{LABEL}> "Travel tripod" .
<http://example.org/d500> <{LABEL}> "Nikon D500"@en .
<http://example.org/tripod> <http://example.org/fits> <http://example.org/d500> .
"""
RDFXML = """<?xml version="1.0"?>
<!DOCTYPE rdf:RDF [ <!ENTITY ex "http://example.org/"> ]>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#">
  <rdf:Description rdf:about="&ex;tripod"><rdfs:label>Travel tripod</rdfs:label></rdf:Description>
  <rdf:Description rdf:about="&ex;d500"><rdfs:label xml:lang="en">Nikon D500</rdfs:label></rdf:Description>
</rdf:RDF>
"""
TABLE = """name,price,released
Nikon D500 DSLR Camera Body,1499,2016
"Manfrotto Befree Travel Tripod",199,2014
Unknown gadget,5,2020
"""
STARK = """id,query,answer_ids
1,a DSLR for wildlife photography,[8]
2,"a travel tripod, light",[14]
3,a lens cap,"[15, 16]"
"""
TREC_TOPICS = "1\ttravel tripod\n2\tnikon dslr\n"
TREC_QRELS = "1 0 B007 1\n2 0 B001 2\n2 0 B004 0\n"
METAQA = "which brand makes [Nikon D500 DSLR Camera Body]\tNikon\nwhat is [Canon] known for\tcameras|printers\n"
PHENOPACKETS = "\n".join(json.dumps(c) for c in [
    {"id": "P1", "sex": "FEMALE", "observed": [["HP:1", "Seizure"], ["HP:2", "High forehead"]],
     "excluded": [["HP:3", "Tall stature"]], "diseases": [["OMIM:1", "Focal epilepsy"]], "genes": [["1", "ETS1"]]},
    {"id": "P2", "observed": [["HP:2", "High forehead"]], "diseases": [["OMIM:2", "Bossing"]]},
]) + "\n"
SCIFACT_CLAIMS = "id,claim,evidence\n1,Aspirin thins the blood,x\n2,Tripods fold,y\n"
SCIFACT_QRELS = "1 0 B007 1\n2 0 B001 1\n"

#: (family, file names, seed contents, CLI arguments after the files).
FAMILIES = {
    "jsonl": (["kb.jsonl"], ["\n".join(json.dumps(r) for r in JSONL) + "\n"], ["kb", "build", "jsonl", "{0}"]),
    "turtle": (["kb.ttl"], [TURTLE], ["kb", "build", "rdf", "{0}"]),
    "ntriples": (["kb.nt"], [NTRIPLES], ["kb", "build", "rdf", "{0}"]),
    "rdfxml": (["kb.rdf"], [RDFXML], ["kb", "build", "rdf", "{0}"]),
    "table": (["prices.csv"], [TABLE], ["tables", "add", "{0}", "--entity-column", "name", "--replace"]),
    "stark": (["qa.csv"], [STARK], ["eval", "stark", "{0}", "--limit", "5"]),
    "trec": (["topics.tsv", "qrels.txt"], [TREC_TOPICS, TREC_QRELS], ["eval", "trec", "{0}", "{1}", "--limit", "5"]),
    "metaqa": (["qa_test.txt"], [METAQA], ["eval", "metaqa", "{0}", "--limit", "5"]),
    "phenopackets": (["cases.jsonl"], [PHENOPACKETS], ["eval", "phenopackets", "{0}", "--limit", "5"]),
    "scifact": (["claims.csv", "qrels.txt"], [SCIFACT_CLAIMS, SCIFACT_QRELS],
                ["eval", "scifact", "{0}", "{1}", "--limit", "5"]),
}
#: How many cases of each family the corpus holds (1,150 in all).
COUNTS = {"jsonl": 300, "turtle": 120, "ntriples": 100, "rdfxml": 110, "table": 200, "stark": 90, "trec": 60,
          "metaqa": 60, "phenopackets": 70, "scifact": 40}

HOSTILE = [
    b"\x00", b"\xff\xfe", b"\xc3", b"\xef\xbb\xbf", b"\r", b"\r\n", b"\x1b[31m", b"\t\t", b'"', b"'", b",", b"\\",
    b"{", b"}", b"[", b"]", b"<", b">", b"&", b";", b".", b"@prefix", b"\\ud800", b'"\\udfff"', b"NaN", b"-Infinity",
    b"1e999999", b"9" * 5000, b"[" * 3000, b"{\"a\":" * 1200, b"\xf0\x9f\x98\x80", "Ωmega ünïcödé".encode(),
    b"<!ENTITY x \"&x;&x;\">", b"&lol;", b"]]>", b"<!--", b"\"\"\"", b"^^<http://www.w3.org/2001/XMLSchema#int>",
    b"_:b0", b"<http://x/ y>", "\u2028".encode(), b"\x0b", b"\x0c", b"\x85",
]
LAUGHS = ("<!DOCTYPE r [<!ENTITY a \"aaaaaaaaaa\">" + "".join(
    f"<!ENTITY {chr(98 + i)} \"{f'&{chr(97 + i)};' * 10}\">" for i in range(8)) + "]>").encode()


@dataclass
class Case:
    family: str
    number: int
    files: dict[str, bytes] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    mutations: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.family}-{self.number:03d}-{'+'.join(self.mutations)}"


def _json_value(rng: random.Random, depth: int = 0):
    kinds = [lambda: None, lambda: True, lambda: False, lambda: 0, lambda: -1, lambda: 10 ** rng.randrange(1, 30),
             lambda: rng.random() * 1e300, lambda: "", lambda: "x" * rng.randrange(1, 50),
             lambda: "a b\u0000c\u202e", lambda: [_json_value(rng, depth + 1)],
             lambda: {"k": _json_value(rng, depth + 1)}]
    return kinds[rng.randrange(len(kinds) if depth < 2 else len(kinds) - 2)]()


def _mutate_json_line(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    lines = data.split(b"\n")
    index = rng.randrange(len(lines))
    try:
        obj = json.loads(lines[index])
    except ValueError:
        return data, "json-skip"
    if not isinstance(obj, dict):
        return data, "json-skip"
    key = rng.choice(list(obj) + ["kind", "id", "type", "name", "iri", "fields", "aliases", "xrefs", "head",
                                  "relation", "tail", "qualifiers", "extra"])
    if rng.random() < 0.2:
        obj.pop(key, None)
        what = f"drop-{key}"
    else:
        obj[key] = _json_value(rng)
        what = f"set-{key}"
    lines[index] = json.dumps(obj, ensure_ascii=rng.random() < 0.5).encode()
    return b"\n".join(lines), what


def _mutate(rng: random.Random, data: bytes, family: str) -> tuple[bytes, str]:
    choice = rng.randrange(10 if family in ("jsonl", "phenopackets") else 9)
    if not data:
        return rng.choice(HOSTILE), "plant-into-empty"
    at = rng.randrange(len(data) + 1)
    if choice == 0:
        return data[:at], "cut"
    if choice == 1:
        flipped = bytearray(data)
        for _ in range(rng.randrange(1, 6)):
            flipped[rng.randrange(len(flipped))] = rng.randrange(256)
        return bytes(flipped), "flip"
    if choice == 2:
        return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8))) + data[at:], "insert"
    if choice == 3:
        return data[:at] + data[at + rng.randrange(1, 40):], "delete"
    if choice in (4, 5):
        return data[:at] + rng.choice(HOSTILE) + data[at:], "plant"
    lines = data.split(b"\n")
    if choice == 6:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
        return b"\n".join(lines), "duplicate-line"
    if choice == 7:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines), "swap-lines"
    if choice == 8:
        return rng.choice([b"", b"\n\n", b"\xef\xbb\xbf", b" ", data * rng.randrange(2, 20)]), "replace-whole"
    return _mutate_json_line(rng, data)


def _special(rng: random.Random, family: str, data: bytes) -> tuple[bytes, str] | None:
    """Rare, heavier damage: entity bombs, over-long literals, gzip (whole or cut)."""
    roll = rng.random()
    if family == "rdfxml" and roll < 0.08:
        return data.replace(b"<!DOCTYPE rdf:RDF [ <!ENTITY ex \"http://example.org/\"> ]>", LAUGHS), "entity-bomb"
    if family in ("jsonl", "turtle", "ntriples") and roll < 0.01:
        filler = b"z" * (17 << 20)
        return data.replace(b"Travel tripod", filler, 1).replace(b"Aluminium travel tripod.", filler, 1), "huge-literal"
    return None


def corpus(seed: int = SEED) -> list[Case]:
    rng = random.Random(seed)
    cases = []
    for family, count in COUNTS.items():
        names, seeds, args = FAMILIES[family]
        for number in range(count):
            case = Case(family, number)
            target = rng.randrange(len(names))
            for index, (name, text) in enumerate(zip(names, seeds)):
                data = text.encode("utf-8")
                if index == target:
                    special = _special(rng, family, data)
                    if special is not None:
                        data, what = special
                        case.mutations.append(what)
                    else:
                        for _ in range(rng.choice((1, 1, 2))):
                            data, what = _mutate(rng, data, family)
                            case.mutations.append(what)
                    if family != "table" and rng.random() < 0.05:  # gzip it, whole or cut
                        packed = gzip.compress(data)
                        cut = rng.random() < 0.5
                        data = packed[: rng.randrange(len(packed))] if cut else packed
                        name = name + ".gz"
                        case.mutations.append("gzip-cut" if cut else "gzip")
                case.files[name] = data
            case.args = args
            cases.append(case)
    return cases
