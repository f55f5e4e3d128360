"""The relation phrases of a KB's ontology and the names of its hierarchies' terms, with their vectors, stored with
the KB.

The offline reader (:mod:`kqe_rdf.methods.reading`) ranks relation paths partly by how their phrases
embed near the request, and links a phrase no name matches to the term whose name embeds nearest ("tall man" →
Tall stature); the build encodes every phrase and every such name once, so a first request does not.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from ..core.resources import cached, keep

PHRASES = "phrases.npz"
#: The vectors of the names of each hierarchy's terms (:func:`write_term_vectors`).
TERMS = "terms.npz"
#: Phrases encoded at request time are kept for later processes while there are at most this many (3 MB): what
#: a command's first requests need, not a long-running server's every path.
REMEMBERED = 2_000


def relation_phrases(schema) -> list[str]:
    """How every relation reads in either direction: the phrases the ranking embeds for one hop."""
    return sorted({p for r in schema.relations for p in (schema.relations[r].label, schema.inverse_label(r))})


def write_phrase_vectors(schema, encoder, path) -> None:
    """The one-hop phrases' vectors, computed with the KB so that a first request does not encode them."""
    phrases = relation_phrases(schema)
    vectors = encoder.encode(phrases) if phrases else np.zeros((0, 1), dtype=np.float32)
    aside = Path(path).with_name(Path(path).name + ".part")  # (a KB re-embedded while it is read: never half a file)
    with open(aside, "wb") as out:
        np.savez(out, phrases=np.array(phrases), vectors=vectors, model_id=np.array(encoder.model_id))
    os.replace(aside, path)


def phrase_encoder(kb_path) -> str | None:
    """The model id of the encoder that made the relation phrase vectors stored in a KB (None: it has none)."""
    path = Path(kb_path) / PHRASES
    if not path.is_file():
        return None
    with np.load(path) as stored:
        return str(stored["model_id"])


def stored_phrase_vectors(kb) -> dict[str, np.ndarray]:
    """The phrase vectors stored with the KB, if they were made by the encoder the KB uses now."""
    path = kb.path / PHRASES
    if not path.is_file():
        return {}
    with np.load(path) as stored:
        if str(stored["model_id"]) != kb.encoder.model_id:  # (not the encoder its requests are encoded with)
            return {}
        return dict(zip((str(p) for p in stored["phrases"]), stored["vectors"]))


def _remembered_name(kb) -> str:
    made_from = repr((str(kb.path.resolve()), kb.manifest.get("created"), kb.encoder.model_id))
    return f"phrases-{hashlib.sha256(made_from.encode()).hexdigest()[:24]}.pickle"


def remembered_phrase_vectors(kb) -> dict[str, np.ndarray]:
    """Phrases earlier processes encoded for this KB at request time (the two-hop paths' phrases, which the build
    does not store): a new process reads them instead of encoding them again, a quarter of a first request."""
    return cached(_remembered_name(kb), dict)


def remember_phrase_vectors(kb, vectors: dict[str, np.ndarray]) -> None:
    """Keep request-time phrase vectors for later processes (:func:`remembered_phrase_vectors`), with those the file
    holds already: another reader of the KB, in this process or another, may have written phrases since."""
    merged = {**remembered_phrase_vectors(kb), **vectors}
    if len(merged) <= REMEMBERED:
        keep(_remembered_name(kb), merged)


def term_classes(schema, documents) -> dict[str, tuple[list[str], list[str]]]:
    """Class IRI → (its nodes' IRIs in IRI order, their names) for each class with a hierarchy (phenotypes, not films)
    and two nodes at least: the names a phrase is linked to by meaning (:meth:`.linking.Linker.meant`), in the order
    the name index lists its nodes."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for d in sorted(documents, key=lambda d: d.iri):
        for cls in d.types:
            if cls not in out:
                out[cls] = ([], [])
            out[cls][0].append(d.iri)
            out[cls][1].append(d.name)
    return {cls: nodes for cls, nodes in sorted(out.items())
            if len(nodes[0]) > 1 and schema.hierarchy_relation(cls) is not None}


def _digest(iris: list[str]) -> str:
    return hashlib.sha256("\n".join(iris).encode()).hexdigest()


def write_term_vectors(classes: dict[str, tuple[list[str], list[str]]], encoder, path, progress=None) -> None:
    """The names of :func:`term_classes` encoded with the KB, so that its first request that links by meaning does not
    encode a whole class (HPO's 19,034 phenotype names: two minutes of CPU); ``progress`` is called with each batch's
    size. Each class's IRIs are kept as a digest: a KB whose nodes changed since is encoded at request time."""
    arrays: dict[str, np.ndarray] = {"model_id": np.array(encoder.model_id), "classes": np.array(sorted(classes))}
    for number, cls in enumerate(sorted(classes)):
        iris, names = classes[cls]
        arrays[f"vectors_{number}"] = encoder.encode(names, progress=progress).astype(np.float16)
        arrays[f"digest_{number}"] = np.array(_digest(iris))
    aside = Path(path).with_name(Path(path).name + ".part")
    with open(aside, "wb") as out:
        np.savez(out, **arrays)
    os.replace(aside, path)


def stored_term_vectors(kb, iris: list[str], cls: str) -> np.ndarray | None:
    """The vectors the build stored for the names of ``cls``'s nodes ``iris``, if the encoder the KB uses now made
    them and the class has those nodes still (else None)."""
    path = kb.path / TERMS
    if not path.is_file():
        return None
    with np.load(path) as stored:
        classes = [str(c) for c in stored["classes"]]
        if str(stored["model_id"]) != kb.encoder.model_id or cls not in classes:
            return None
        number = classes.index(cls)
        if str(stored[f"digest_{number}"]) != _digest(iris):
            return None
        return stored[f"vectors_{number}"]


def term_name_vectors(kb, iris: list[str], names: list[str], cls: str) -> np.ndarray:
    """The vectors of the names of one class's nodes (``iris``, in that order), for linking a phrase no name matches
    by meaning ("tall man" → Tall stature): those stored with the KB (:func:`write_term_vectors`), else encoded on
    first need and kept for later processes (a KB built before they were, or with ``embedding_term_names`` off)."""
    if (stored := stored_term_vectors(kb, iris, cls)) is not None:
        return stored
    made_from = repr((str(kb.path.resolve()), kb.manifest.get("created"), kb.encoder.model_id, cls, len(iris)))
    name = f"terms-{hashlib.sha256(made_from.encode()).hexdigest()[:24]}.pickle"

    def make() -> np.ndarray:
        import logging

        logging.getLogger(__name__).warning("encoding the names of %d %s nodes once for links by meaning",
                                            len(names), cls.rsplit("#", 1)[-1])
        return kb.encoder.encode(names).astype(np.float16)

    return cached(name, make)
