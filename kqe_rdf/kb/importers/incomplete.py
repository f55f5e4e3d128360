"""An incomplete KB (GRAFT-Net's setting): a seeded random share of the edges kept out of the graph and written
only as sentences in the documents of their head nodes.

Sun et al. (GRAFT-Net, EMNLP 2018) measure question answering over a KB and text by removing part of the KB's
facts, so that some answers can only be read from text. An importer that takes the options
``--option kg_fraction=0.5 --option seed=0`` keeps that fraction of the edges (chosen by ``random.Random(seed)``,
so a build is reproducible) and turns each other edge into one sentence, "<head> <relation label> <tail>."
("Kismet directed by William Dieterle."), a ``description`` of its head node. Every node stays (typed as in the
full KB): only edges move.

>>> plan = TextOnlyEdges.from_options({"kg_fraction": "0.5", "seed": "0"})
>>> sorted(plan.left_out(4))
[1, 3]
>>> TextOnlyEdges.from_options({}) is None
True
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from ...core.errors import InputError

#: The document field the sentences go into (``kqe:description``, a field of every domain).
FIELD = "description"


@dataclass(frozen=True)
class TextOnlyEdges:
    """Which edges stay in the graph: ``fraction`` of them, drawn with ``seed``."""

    fraction: float
    seed: int = 0

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> TextOnlyEdges | None:
        """The plan the importer options ``kg_fraction`` and ``seed`` ask for; None for the whole graph."""
        if "kg_fraction" not in options:
            if "seed" in options:
                raise InputError("--option seed=N draws the edges kept with --option kg_fraction=F; "
                                 "give kg_fraction too (e.g. kg_fraction=0.5)")
            return None
        try:
            fraction = float(str(options["kg_fraction"]))
        except ValueError:
            raise InputError(f"--option kg_fraction must be a number between 0 and 1, "
                             f"got {options['kg_fraction']!r}") from None
        if not 0.0 <= fraction <= 1.0:
            raise InputError(f"--option kg_fraction must be between 0 and 1 (the share of edges kept in the graph), "
                             f"got {fraction:g}")
        try:
            seed = int(str(options.get("seed", 0)))
        except ValueError:
            raise InputError(f"--option seed must be an integer, got {options['seed']!r}") from None
        return None if fraction == 1.0 else cls(fraction, seed)

    def left_out(self, edges: int) -> set[int]:
        """Positions (in the source's order) of the edges that become text: ``round((1 - fraction) * edges)`` of
        them, the same ones for the same seed and source."""
        kept = round(self.fraction * edges)
        return set(random.Random(self.seed).sample(range(edges), edges - kept))

    def describe(self) -> str:
        return f"{self.fraction:g} of the edges kept in the graph (seed {self.seed}); the others only as sentences " \
               f"in their head nodes' documents"


def sentence(head: str, label: str, tail: str) -> str:
    """One edge as a sentence of its head's document.

    >>> sentence("Kismet", "directed by", "William Dieterle")
    'Kismet directed by William Dieterle.'
    """
    return f"{head} {label} {tail}."
