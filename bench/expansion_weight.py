"""What an offline expansion adds, per query: the signals an expansion's weight could be read from, and the nDCG@10
each weighting rule would give on a dev set (issue 53).

``collect`` runs the expensive part of ``lkqe-offline`` once per query (BM25's passages, the key sentences and
their cosines to the query) and writes it with BM25's own top 100; ``rules`` then re-searches each query with
lkqe-offline's final BM25 query (the query's words 3 times, the key sentences' words in whole clauses ``weight``
times each) under each weighting rule (only BM25 searches: seconds) and prints the mean nDCG@10 and the queries
won and lost against BM25::

    python bench/expansion_weight.py collect scifact $S/scifact/claims_train.csv $S/scifact/qrels_train.txt \\
        --kb $KBS/scifact --out /tmp/scifact.jsonl
    python bench/expansion_weight.py collect trec $S/trec_dl19/topics.dl19-passage.txt \\
        $S/trec_dl19/qrels.dl19-passage.txt --kb $KBS/dl19 --out /tmp/dl19.jsonl
    python bench/expansion_weight.py rules --kb $KBS/scifact /tmp/scifact.jsonl

``kar`` does the same for kar-offline, whose weight is read from what its KG evidence reaches of the request::

    python bench/expansion_weight.py kar metaqa $S/metaqa/1-hop/dev.txt.gz --kb $KBS/metaqa --sample 300 --seed 1 \\
        --out /tmp/metaqa-kar.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def collect(args) -> None:
    from kqe_rdf.core.config import Settings
    from kqe_rdf.evaluation import querysets
    from kqe_rdf.evaluation.runner import counting_absent, gold_qrels
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.methods.expansion.lkqe import LKQE

    settings = Settings()
    kb = KnowledgeBase.open(Path(args.kb), settings)
    qs = querysets.load(args.queryset, *map(Path, args.paths))
    if args.sample is not None and args.sample < len(qs):  # the claims `kqe-rdf eval --sample N --seed S` draws
        import random

        picked = sorted(random.Random(args.seed).sample(range(len(qs)), args.sample))
        qs.queries = [qs.queries[i] for i in picked]
    qrels = counting_absent(gold_qrels(kb, qs)[0], 1)
    lkqe = LKQE(kb, settings)
    done = {json.loads(line)["qid"] for path in args.skip for line in open(path)}
    with open(args.out, "w") as out:
        for n, q in enumerate((q for q in qs if q.qid not in done), start=1):
            hits = lkqe.first.search(q.text, names=False)
            passages = [kb.document(h.iri).text for h in hits]
            key = lkqe.key_sentences(q.text, passages)
            bm25 = kb.text_index.search(q.text, 100)
            out.write(json.dumps({"qid": q.qid, "query": q.text, "qrels": qrels[q.qid], "key": key,
                                  "passage_scores": [h.score for h in hits], "bm25": bm25}) + "\n")
            out.flush()  # a stopped run keeps what it collected (--skip it when starting again)
            if n % 50 == 0:
                print(f"{n} queries", file=sys.stderr)


def ndcg10(ranked: list[str], judged: dict[str, int]) -> float:
    """nDCG@10 with graded gains (ir_measures' nDCG: gain = relevance, log2 discount)."""
    import math

    dcg = sum(judged.get(iri, 0) / math.log2(i + 2) for i, iri in enumerate(ranked[:10]))
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def signals(rec: dict, terms, first_page: list[str]) -> dict[str, float]:
    """The per-query signals a weight could be read from (``first_page``: the full-weight expansion's first 8)."""
    query = set(terms(rec["query"]))
    key = rec["key"]
    added = set(terms(" ".join(s for s, _ in key)))
    scores = [s for _, s in rec["bm25"]]
    own = {iri for iri, _ in rec["bm25"][:8]}
    return {
        "new": sum(iri not in own for iri in first_page) / max(len(first_page), 1),
        "qlen": len(query),
        "sim_top": key[0][1] if key else 0.0,
        "coverage": len(query & added) / max(len(query), 1),
        "novelty": len(added - query) / max(len(added), 1),
        "bm25_gap": (scores[0] - scores[1]) / scores[0] if len(scores) > 1 and scores[0] else 0.0,
    }


def rules(args) -> None:
    from kqe_rdf.core.config import Settings
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.kb.words import terms
    from kqe_rdf.methods.expansion.base import counted_words
    from kqe_rdf.methods.expansion.text import in_clauses

    settings = Settings()
    kb = KnowledgeBase.open(Path(args.kb), settings)
    records = [json.loads(line) for path in args.cache for line in open(path)]
    records = list({rec["qid"]: rec for rec in records}.values())  # files that overlap count a query once
    ratio, repeat = settings.lkqe.max_ratio, settings.lkqe.query_repeat

    def searched(rec: dict, weight: float, depth: int = 100, cut: bool = False) -> list[str]:
        """lkqe-offline's final BM25 at this weight (as ``Expansion.finish`` builds its bag); ``cut``: the key
        sentences cut at the budget's last word, as before whole clauses were kept."""
        budget = ratio * max(len(rec["query"].split()), 1)
        key = [s for s, _ in rec["key"]]
        added = " ".join(" ".join(key).split()[:budget]) if cut else in_clauses(key, budget)
        if weight <= 0 or not added:
            return [iri for iri, _ in rec["bm25"][:depth]]
        bag = counted_words(rec["query"], repeat) + counted_words(added, weight)
        return [iri for iri, _ in kb.text_index.search_weighted(bag, depth)]

    for rec in records:
        rec["signals"] = signals(rec, terms, searched(rec, 1.0, 8))

    def run(weight) -> list[float]:
        return [ndcg10(searched(rec, weight(rec)), rec["qrels"]) for rec in records]

    bm25 = run(lambda rec: 0.0)
    rows = [("bm25", bm25)] + [(f"constant weight {w}", run(lambda rec, w=w: w)) for w in (0.25, 0.5, 1.0)]
    rows.append(("constant weight 1.0, budget cut mid-clause",
                 [ndcg10(searched(rec, 1.0, cut=True), rec["qrels"]) for rec in records]))
    for name, lo, hi in _RULES:
        rows.append((f"{name}: 0 at {lo}, 1 at {hi}", run(_ramp(name, lo, hi))))
    print(f"{len(records)} queries of {' '.join(args.cache)}")
    print("| weight | nDCG@10 | queries better / worse than BM25 |\n|---|---:|---|")
    for name, scores in rows:
        won = sum(s > b + 1e-9 for s, b in zip(scores, bm25))
        lost = sum(s < b - 1e-9 for s, b in zip(scores, bm25))
        print(f"| {name} | {100 * statistics.fmean(scores):.2f} | {won} / {lost} |")


def _ramp(name: str, lo: float, hi: float):
    def weight(rec):
        x = rec["signals"][name]
        return min(max((x - lo) / (hi - lo), 0.0), 1.0)
    return weight


#: Rules tried: a signal, where the weight is 0 and where it is 1 (linear between; a falling ramp when lo > hi).
#: ``new``: the share of the full-weight expansion's first 8 hits that are not among BM25's (the rule shipped:
#: 0 at none, 1 from half); ``novelty``: the share of the key sentences' words the query lacks; ``bm25_gap``: how
#: far BM25's first hit scores above its second; ``sim_top``: the best key sentence's cosine; ``qlen``: query words.
_RULES = [
    ("new", 0.0, 0.5), ("new", 0.0, 0.25), ("new", 0.125, 0.625), ("new", 0.25, 0.5),
    ("novelty", 0.7, 0.9), ("novelty", 0.9, 1.0),
    ("bm25_gap", 0.5, 0.0), ("bm25_gap", 0.4, 0.1),
    ("sim_top", 0.9, 0.6),
    ("qlen", 15, 5),
]


def kar(args) -> None:
    """kar-offline per query: its expansion once (unweighed), the reach of its evidence (``kar.reach``), and the
    final ranking at the weight each ``kar_weight_full`` tried gives, at 0 (the request alone) and at 1 (unweighed:
    the code before the weighing); then each one's Hit@1 and the queries won and lost against weight 1."""
    from kqe_rdf.core.config import Settings
    from kqe_rdf.evaluation import querysets
    from kqe_rdf.evaluation.runner import counting_absent, gold_qrels
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.methods.expansion import expansion_pipeline
    from kqe_rdf.methods.expansion.base import searched
    from kqe_rdf.methods.expansion.kar import reach

    settings = Settings(kar_weight_full=0.0)  # unweighed: the weights are tried below
    kb = KnowledgeBase.open(Path(args.kb), settings)
    qs = querysets.load(args.queryset, *map(Path, args.paths), **({"wording": args.wording} if args.wording else {}))
    if args.sample is not None and args.sample < len(qs):  # the queries `kqe-rdf eval --sample N --seed S` draws
        import random

        picked = sorted(random.Random(args.seed).sample(range(len(qs)), args.sample))
        qs.queries = [qs.queries[i] for i in picked]
    qrels = counting_absent(gold_qrels(kb, qs)[0], 1)
    stage = expansion_pipeline("kar-offline", kb, settings, 10, args.type or None)
    fulls = (0.25, 0.5, 0.75, 1.0)
    records = []
    with open(args.out, "w") as out:
        for q in qs:
            exp = stage.expander.expand(q.text)
            constants, conditions = stage.expander.reader.mentions(q.text)  # as KAR.weigh reads them
            share, words, reached = reach(exp, [m.text for m in constants + conditions])
            ranked = {}
            for w in sorted({0.0, 1.0} | {round(min(1.0, share / full), 4) for full in fulls}):
                exp.weight = w
                exp.finish(stage.expander.repeat, stage.expander.counted)
                hits = searched(stage.final, exp, q.qid) or stage.final.search(q.text, q.qid, names=False)
                ranked[w] = [h.iri for h in hits[:10]]
            rec = {"qid": q.qid, "query": q.text, "reach": share, "words": words, "reached": reached,
                   "expanded": bool(exp.expansions), "ranked": {str(w): r for w, r in ranked.items()},
                   "gold": sorted(i for i, g in qrels[q.qid].items() if g > 0)}
            records.append(rec)
            out.write(json.dumps(rec) + "\n")
            out.flush()

    def hit1(rec, w):
        top = rec["ranked"][str(w)][:1]
        return float(bool(top) and top[0] in rec["gold"])

    def ruled(rec, full):
        return 1.0 if full == 0 else round(min(1.0, rec["reach"] / full), 4)

    base = [hit1(r, 1.0) for r in records]
    print(f"{len(records)} queries, {sum(r['expanded'] for r in records)} expanded")
    print("| kar_weight_full | Hit@1 | won / lost against weight 1 |\n|---|---:|---|")
    for full in (0.0, *fulls, None):
        scores = [hit1(r, 0.0) for r in records] if full is None else [hit1(r, ruled(r, full)) for r in records]
        won = sum(s > b for s, b in zip(scores, base))
        lost = sum(s < b for s, b in zip(scores, base))
        name = "weight 0 (the request alone)" if full is None else f"{full}" + (" (off: weight 1)" if not full else "")
        print(f"| {name} | {100 * statistics.fmean(scores):.2f} | {won} / {lost} |")


def names_reach(args) -> None:
    """The share of each request's words that the KG's names it mentions reach (``kar.reach`` with no entity
    linked and no relation read: the part of kar-offline's reach that needs no reading), as quantiles: cheap,
    for any query set, to see which requests the KG has words for."""
    from kqe_rdf.core.config import Settings
    from kqe_rdf.evaluation import querysets
    from kqe_rdf.kb.knowledge_base import KnowledgeBase
    from kqe_rdf.methods.expansion.base import Expansion
    from kqe_rdf.methods.expansion.kar import KAR, reach

    settings = Settings()
    kb = KnowledgeBase.open(Path(args.kb), settings)
    qs = querysets.load(args.queryset, *map(Path, args.paths))
    reader = KAR(kb, settings).reader
    shares = []
    for q in qs:
        constants, conditions = reader.mentions(q.text)
        shares.append(reach(Expansion(q.text, "kar-offline"), [m.text for m in constants + conditions])[0])
    cuts = statistics.quantiles(shares, n=10, method="inclusive")
    print(f"{len(shares)} requests; reach deciles " + ", ".join(f"{c:.2f}" for c in cuts)
          + f"; below 0.25: {sum(s < 0.25 for s in shares)}; 0: {sum(s == 0 for s in shares)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="key sentences and BM25's top 100 per query, once")
    c.add_argument("queryset")
    c.add_argument("paths", nargs="+")
    c.add_argument("--kb", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--sample", type=int, help="N queries drawn at random, as `kqe-rdf eval --sample N` draws them")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--skip", action="append", default=[],
                   help="a file collect wrote: its queries are not collected again (repeat for several)")
    r = sub.add_parser("rules", help="nDCG@10 of each weighting rule from a collected file")
    r.add_argument("cache", nargs="+", help="files collect wrote (together: one set of queries)")
    r.add_argument("--kb", required=True)
    k = sub.add_parser("kar", help="kar-offline's Hit@1 under each kar_weight_full, per query against unweighed")
    k.add_argument("queryset")
    k.add_argument("paths", nargs="+")
    k.add_argument("--kb", required=True)
    k.add_argument("--out", required=True)
    k.add_argument("--type", action="append", default=[])
    k.add_argument("--wording")
    k.add_argument("--sample", type=int)
    k.add_argument("--seed", type=int, default=0)
    n = sub.add_parser("reach", help="how much of each request the KG's names it mentions reach (deciles)")
    n.add_argument("queryset")
    n.add_argument("paths", nargs="+")
    n.add_argument("--kb", required=True)
    args = parser.parse_args()
    {"collect": collect, "rules": rules, "kar": kar, "reach": names_reach}[args.command](args)


if __name__ == "__main__":
    main()
