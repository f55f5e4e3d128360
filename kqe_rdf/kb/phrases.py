"""The relation phrases of a KB's ontology and their vectors, stored with the KB.

The offline reader (:mod:`kqe_rdf.methods.reading`) ranks relation paths partly by how their phrases
embed near the request; the build encodes every phrase once, so a first request does not load the encoder
for them.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from ..core.resources import cached, keep

PHRASES = "phrases.npz"
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


def term_name_vectors(kb, iris: list[str], names: list[str], cls: str) -> np.ndarray:
    """The vectors of the names of one class's nodes (``iris``, in that order), for linking a phrase no name matches
    by meaning ("tall man" → Tall stature): encoded once per KB and encoder, on first need, and kept for later
    processes (HPO's 19,034 phenotype names: about 35 s on two cores)."""
    made_from = repr((str(kb.path.resolve()), kb.manifest.get("created"), kb.encoder.model_id, cls, len(iris)))
    name = f"terms-{hashlib.sha256(made_from.encode()).hexdigest()[:24]}.pickle"

    def make() -> np.ndarray:
        import logging

        logging.getLogger(__name__).warning("encoding the names of %d %s nodes once for links by meaning",
                                            len(names), cls.rsplit("#", 1)[-1])
        return kb.encoder.encode(names).astype(np.float16)

    return cached(name, make)
