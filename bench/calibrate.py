"""The calibration of ``ask``'s confidence: the probability that its first answer is right, fitted on the KGQA dev
sets (MetaQA 1/2/3-hop, WC2014 P1/P2/C, PathQuestion-Large 2/3-hop, PathQuestion 2/3-hop).

Two steps, so the fit can be redone without asking again:

    python bench/calibrate.py --kbs /work/kbs --collect /tmp/calibration.jsonl --sample 150 --seed 0
    python bench/calibrate.py --fit /tmp/calibration.jsonl            # writes kqe_rdf/methods/answering/calibration.json

``--collect`` runs ``ask`` (offline, the default sources) on ``--sample`` questions of each set drawn with
``--seed`` and writes one record per question: the set, whether the first answer is a gold answer (gold ids
resolved as ``kqe-rdf eval`` resolves them) and the confidence's inputs (``Answer.confidence_because``).
``--fit`` fits a logistic regression (L2, by Newton's method) of "the first answer is right" on
:func:`kqe_rdf.methods.answering.confidence.features`, and prints, as Markdown, the reliability table and the
expected calibration error (ECE, 10 equal-width bins) of the raw confidence and of the calibrated one, both
measured on held-out questions (2-fold by question, folds drawn with the seed: each half is scored by the fit on
the other), with AUROC; then fits on every question and writes the coefficients.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = (ROOT / ".." / "shared" / "data").resolve()
sys.path.insert(0, str(ROOT))

from kqe_rdf.methods.answering import confidence  # noqa: E402

#: (set, query-set loader, files under ../shared/data, KB folder under --kbs)
SETS = [
    *((f"metaqa-{h}", "metaqa", (f"metaqa/{h}/dev.txt.gz",), "metaqa") for h in ("1-hop", "2-hop", "3-hop")),
    *((f"wc2014-{s}", "irn", (f"wc2014/{s}.txt.gz",), "wc2014") for s in ("WC-P1", "WC-P2", "WC-C")),
    ("pql-2h", "irn", ("pql/PQL-2H.txt.gz",), "pql2"),
    ("pql-3h", "irn", ("pql/PQL-3H.txt.gz",), "pql3"),
    ("pq-2h", "irn", ("pq/PQ-2H.dev.txt.gz",), "pq2"),
    ("pq-3h", "irn", ("pq/PQ-3H.dev.txt.gz",), "pq3"),
]
BINS = 10
#: L2 penalty of the fit (on standardised features; the bias is not penalised).
PENALTY = 1.0
#: What may only lower the confidence (the issue's "lowered for large answer sets, unread words and approximate
#: links"): a fit that gives one of these a positive weight drops it (weight 0) and is fitted again.
LOWERING = ("log answers", "unread words", "hops not named", "approximate link")


def collect(kbs: Path, out: Path, sample: int, seed: int, only: list[str] | None) -> None:
    from kqe_rdf.core.config import Settings
    from kqe_rdf.evaluation.querysets import load
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.methods.answering import answer

    settings = Settings()
    with open(out, "a", encoding="utf-8") as sink:
        for name, kind, files, kb_name in SETS:
            if only and name not in only:
                continue
            kb = KnowledgeBase.open(kbs / kb_name, settings)
            qs = load(kind, *(DATA / f for f in files))
            picked = sorted(random.Random(seed).sample(range(len(qs)), min(sample, len(qs))))
            queries = [qs.queries[i] for i in picked]
            resolved = kb.resolve_identifiers({d for q in queries for d in q.answers}, qs.answers_are_names)
            started = time.perf_counter()
            for q in queries:
                gold = {i for d in q.answers for i in resolved.get(d, ())}
                result = answer(kb, settings, q.text, offline=True)
                first = set(result.answers[0].iris) if result.answers else set()
                sink.write(json.dumps({"set": name, "qid": q.qid, "question": q.text, "hit": bool(first & gold),
                                       "answered": bool(result.answers), "confidence": result.confidence,
                                       "because": result.confidence_because}) + "\n")
            print(f"{name}: {len(queries)} questions in {time.perf_counter() - started:.0f} s", file=sys.stderr)


def design(records: list[dict], names: list[str]) -> np.ndarray:
    return np.array([[confidence.features(r["because"])[n] for n in names] for r in records], dtype=float)


def fit_logistic(x: np.ndarray, y: np.ndarray, names: list[str]) -> tuple[float, np.ndarray]:
    """:func:`newton`'s fit, with every :data:`LOWERING` feature's weight at most 0."""
    kept = np.ones(x.shape[1], dtype=bool)
    while True:
        bias, weights = newton(x[:, kept], y)
        full = np.zeros(x.shape[1])
        full[kept] = weights
        wrong = [i for i, n in enumerate(names) if n in LOWERING and full[i] > 0]
        if not wrong:
            return bias, full
        kept[wrong] = False


def newton(x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Bias and weights (in the features' own units) of an L2-penalised logistic regression, by Newton's method."""
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], PENALTY)
    penalty[0] = 0.0
    for _ in range(100):
        p = 1 / (1 + np.exp(-(z @ w)))
        gradient = z.T @ (p - y) + penalty * w
        hessian = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    weights = w[1:] / scale
    return float(w[0] - (weights * mean).sum()), weights


def predict(bias: float, weights: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-(bias + x @ weights)))


def reliability(p: np.ndarray, y: np.ndarray) -> tuple[list[tuple[str, int, float, float]], float]:
    """Rows (bin, questions, mean confidence, share right) and the ECE: Σ n_bin / n · |right - confidence|."""
    rows, ece = [], 0.0
    for b in range(BINS):
        low, high = b / BINS, (b + 1) / BINS
        inside = (p >= low) & ((p < high) if b < BINS - 1 else (p <= high))
        if inside.any():
            rows.append((f"[{low:.1f}, {high:.1f}{']' if b == BINS - 1 else ')'}", int(inside.sum()),
                         float(p[inside].mean()), float(y[inside].mean())))
            ece += inside.sum() / len(p) * abs(y[inside].mean() - p[inside].mean())
    return rows, float(ece)


def auroc(p: np.ndarray, y: np.ndarray) -> float:
    """The chance that a right answer has a higher confidence than a wrong one (ties count half)."""
    right, wrong = p[y == 1], p[y == 0]
    if not len(right) or not len(wrong):
        return float("nan")
    greater = (right[:, None] > wrong[None, :]).sum() + 0.5 * (right[:, None] == wrong[None, :]).sum()
    return float(greater / (len(right) * len(wrong)))


def fit(path: Path, seed: int, write: bool) -> None:
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    records = [r for r in records if r["answered"]]  # no answer: confidence 0, nothing to calibrate
    names = list(confidence.features({}))
    x, y = design(records, names), np.array([float(r["hit"]) for r in records])
    raw = np.array([float(r["because"].get("raw", r["confidence"])) for r in records])
    fold = np.array(random.Random(seed).choices((0, 1), k=len(records)))
    held = np.zeros(len(records))
    for k in (0, 1):
        bias, weights = fit_logistic(x[fold != k], y[fold != k], names)
        held[fold == k] = predict(bias, weights, x[fold == k])
    bias, weights = fit_logistic(x, y, names)
    out = [f"{len(records)} answered questions ({', '.join(f'{s} {n}' for s, n in sorted(count(records).items()))}); "
           f"{int(y.sum())} first answers right ({y.mean():.3f})", ""]
    for title, p in (("raw confidence (before)", raw), ("calibrated, held out (2-fold)", held)):
        rows, ece = reliability(p, y)
        out += [f"**{title}**: ECE {ece:.4f}, AUROC {auroc(p, y):.4f}, "
                f"wrong answers at >= 0.9: {int(((p >= 0.9) & (y == 0)).sum())} of {int((y == 0).sum())}", "",
                "| confidence | questions | mean confidence | right |", "|---|---:|---:|---:|"]
        out += [f"| {b} | {n} | {m:.3f} | {r:.3f} |" for b, n, m, r in rows] + [""]
    out += ["| set | questions | right | ECE raw | ECE calibrated (held out) | AUROC raw | AUROC calibrated |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for name in sorted(count(records)):
        s = np.array([r["set"] == name for r in records])
        out.append(f"| {name} | {int(s.sum())} | {y[s].mean():.3f} | {reliability(raw[s], y[s])[1]:.4f} | "
                   f"{reliability(held[s], y[s])[1]:.4f} | {auroc(raw[s], y[s]):.4f} | {auroc(held[s], y[s]):.4f} |")
    out += ["", "weights (fit on every question): bias " + f"{bias:.4f}; "
            + ", ".join(f"{n} {w:.4f}" for n, w in zip(names, weights))]
    print("\n".join(out))
    if write:
        confidence.CALIBRATION.write_text(json.dumps({
            "bias": round(bias, 6), "weights": {n: round(float(w), 6) for n, w in zip(names, weights)},
            "fitted": {"command": f"python bench/calibrate.py --fit {path.name} --seed {seed}",
                       "questions": len(records), "sets": count(records),
                       "date": datetime.now(timezone.utc).date().isoformat()}}, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {confidence.CALIBRATION.relative_to(ROOT)}", file=sys.stderr)


def count(records: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        out[r["set"]] = out.get(r["set"], 0) + 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kbs", type=Path, default=Path("/work/kbs"), help="folder of the dev sets' KBs")
    parser.add_argument("--collect", type=Path, help="run ask and append one record per question here")
    parser.add_argument("--sets", nargs="*", help="only these sets (names as in SETS)")
    parser.add_argument("--sample", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fit", type=Path, help="fit on these records and print the reliability tables")
    parser.add_argument("--no-write", action="store_true", help="print only; keep calibration.json as it is")
    args = parser.parse_args()
    if args.collect:
        collect(args.kbs, args.collect, args.sample, args.seed, args.sets)
    if args.fit:
        fit(args.fit, args.seed, not args.no_write)


if __name__ == "__main__":
    main()
