"""How likely an answer of ``ask`` is right: a number from 0 to 1, from what the answer was read from.

An answer is as sure as the weakest of the choices that led to it, and each choice is as sure as its margin
over the alternatives it beat; so the confidence is the product of one share per choice:

- **linking** (grounded readings): each constant's best-linked node's score (1 for an exact name, less for a
  fuzzy or BM25 match), the least of them;
- **reading** (grounded readings): the structural reader scores every relation path it could read from each
  constant and keeps the best; the path's share against those it beat, ``1 / (1 + Σ exp(-(best - other) / T))``
  with :data:`READING_SCALE` as T, so a path that beats another by nothing is a coin toss (0.5) and one ahead by
  0.3 is 0.95 sure; the least share over the constants;
- **the answer among the candidates**: for structural scores (a path's specificity-weighted sum, a hierarchy
  match's IC mean), the answers' share against the candidates below them with the gaps taken relative to the
  answers' score (:data:`ANSWER_SCALE`): a disease 0.3% above the next one is hardly preferred to it, one 12%
  above it clearly is; for support counted in sentences and evidence pieces (text facts, the evidence reader),
  the answer's share of the support, ``s / (s + Σ others)``.

The first answer of a list question is right when the reading is (every answer shares its score), so a list
answer is as sure as its reading. ``because`` keeps each factor, to show why an answer is unsure.

That product (``raw``) ranks answers but is no probability: on the dev sets 7 of 19 wrong answers had 0.9 or
more. :func:`calibrated` turns it into one, the probability that the first answer is right, by a logistic fit
(``calibration.json``, written by ``python bench/calibrate.py``, on samples of the KGQA dev sets) over the raw
value, its factors, how many answers there are, the question's unread relation words and hops no word names,
whether a constant was linked other than by its exact name, the reading's hops, whether readings before it
found nothing, and which stage answered. Each *doubt* (:data:`DOUBTS`: an unread relation word, a hop no word
names, an approximate link, a candidate that ties the answer, a condition the reading dropped, a path it guessed)
lowers the log-odds by :data:`DOUBT` at least, whatever weight the fit gave it: the dev sets hardly show some of
them (no MetaQA constant is linked approximately), and a fit over them gave such a doubt no weight at all.

>>> round(path_share(0.3, [0.0]), 3), round(path_share(0.0, [0.0]), 3)
(0.953, 0.5)
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from pathlib import Path

#: The fitted calibration (``python bench/calibrate.py --fit`` writes it).
CALIBRATION = Path(__file__).with_name("calibration.json")

#: Score units by which a reading path must beat another to be clearly preferred (the reader's path scores).
READING_SCALE = 0.1
#: Relative gap between a structural answer's score and a candidate's at which the answer is clearly preferred.
ANSWER_SCALE = 0.03
#: The features that say an answer is less sure (each 0 or 1), and the least they lower its log-odds by.
DOUBTS = ("unread words", "hops not named", "approximate link", "tie", "dropped conditions", "guessed relation")
DOUBT = 0.5


def path_share(best: float, others: Sequence[float], scale: float = READING_SCALE) -> float:
    """``best``'s share against ``others`` (all scores of one kind): 1 / (1 + Σ exp(-(best - other) / scale))."""
    return 1.0 / (1.0 + sum(math.exp(-max(best - other, 0.0) / scale) for other in others))


def structural_share(answer: float, others: Sequence[float], scale: float = ANSWER_SCALE) -> float:
    """The answers' share against the candidates below them, the gaps relative to the answers' score."""
    size = abs(answer)
    if size == 0:
        return 1.0 / (1 + sum(1 for s in others if s >= answer))
    return path_share(1.0, [1.0 - (answer - s) / size for s in others], scale)


def support_share(answer: float, others: Sequence[float]) -> float:
    """The answer's share of the support (sentences, evidence pieces) every candidate has."""
    total = answer + sum(max(s, 0.0) for s in others)
    return answer / total if total > 0 and answer > 0 else 0.0


def grounded(path: dict, answer_score: float, other_scores: Sequence[float]) -> tuple[float, dict]:
    """The confidence of a grounded reading's answers (``path``: :attr:`.grounded.Grounded.path`)."""
    linked = [max((c.get("score", 0.0) for c in found), default=0.0) for found in path.get("linked", {}).values()]
    linking = min(linked, default=1.0)
    # (A constant of a group the reader read together may list its own path among those its group beat.)
    reading = min((path_share(part["score"], [b["score"] for b in part.get("beat", ())
                                              if "score" in b and b.get("path") != part.get("path")])
                   for part in path.get("reading", ()) if "score" in part), default=1.0)
    answer = structural_share(answer_score, other_scores)
    because = {"linking": round(linking, 4), "reading": round(reading, 4), "answer": round(answer, 4)}
    return round(linking * reading * answer, 4), because


def supported(answer_score: float, other_scores: Sequence[float]) -> tuple[float, dict]:
    """The confidence of an answer read from counted support (text facts, the evidence reader)."""
    share = support_share(answer_score, other_scores)
    return round(share, 4), {"answer": round(share, 4)}


def features(because: dict) -> dict[str, float]:
    """What the calibration reads of an answer (``because``: :func:`grounded`'s or :func:`supported`'s factors
    with ``raw``, ``answers``, ``unread``, ``unnamed`` and ``stage``), each a number."""
    raw = min(max(float(because.get("raw", 0.0)), 1e-3), 1 - 1e-3)
    return {"logit raw": math.log(raw / (1 - raw)),
            "linking": float(because.get("linking", 1.0)),
            "reading": float(because.get("reading", 1.0)),
            "answer": float(because.get("answer", 0.0)),
            "log answers": math.log(max(int(because.get("answers", 1)), 1)),
            "unread words": float(int(because.get("unread", 0)) > 0),
            "hops not named": float(int(because.get("unnamed", 0)) > 0),
            "approximate link": float(float(because.get("linking", 1.0)) < 1.0),
            "hops": float(because.get("hops", 0)),
            "readings tried before": float(int(because.get("tried", 0)) > 0),
            "grounded": float(because.get("stage") == "grounded"),
            "text facts": float(because.get("stage") == "text facts"),
            # the answer no more likely than the candidates that rival it (a share of a half or less)
            "tie": float(float(because.get("answer", 1.0)) <= 0.5 + 1e-9),
            "dropped conditions": float(int(because.get("dropped", 0)) > 0),
            "guessed relation": float(int(because.get("guessed", 0)) > 0)}


@functools.cache
def _fit() -> dict | None:
    try:
        return json.loads(CALIBRATION.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def calibrated(because: dict, fit: dict | None = None) -> float:
    """The probability that the first answer is right: the logistic fit over :func:`features` (the raw value
    when no fit is there).

    >>> calibrated({"raw": 0.9, "answers": 1}, {"bias": 0.0, "weights": {"logit raw": 1.0}})
    0.9
    """
    fit = fit or _fit()
    x = features(because)
    if fit is None:
        z, weights = x["logit raw"], {}
    else:
        z, weights = fit["bias"] + sum(w * x.get(name, 0.0) for name, w in fit["weights"].items()), fit["weights"]
    for name in DOUBTS:  # each doubt lowers the odds by DOUBT at least (its weight, if the fit gave it more)
        if x.get(name):
            z += min(0.0, -DOUBT - weights.get(name, 0.0))
    return round(1 / (1 + math.exp(-z)), 4)
