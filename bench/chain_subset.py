"""Per query, a base run of `bench/devsets.py` against the code on PYTHONPATH, over the questions the chain reader
parses (one constant, a possessive or an `of` phrase): where a reader change can act on a large set, without a full run.

    python bench/chain_subset.py $BASE/metaqa-2-hop.jsonl $KBS/metaqa
"""
import json
import sys
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.methods.registry import pipeline
from kqe_rdf.methods.reading import OfflineTriplets
from kqe_rdf.methods.reading.chains import tokens
run, kbp = sys.argv[1], sys.argv[2]
kb = KnowledgeBase.open(kbp)
stage = pipeline("4step-offline", kb, kb.settings, 1, None)
reader = OfflineTriplets(kb)
n = before = after = 0
for l in open(run):
    r = json.loads(l)
    if r['method'] != '4step-offline': continue
    q = r['query']
    ms, _ = reader.mentions(q)
    if len(ms) != 1: continue
    toks = tokens(q); inside = [i for i, (w, a, b) in enumerate(toks) if a >= ms[0].start and b <= ms[0].end]
    if not inside or not reader.chains.slots(q, (inside[0], inside[-1] + 1)): continue
    n += 1
    gold = {i for g in r['gold'] for i in g['iris']}
    hits = stage.search(q, 'q')
    now = float(bool(hits and hits[0].iri in gold))
    before += r['Hit@1']; after += now
    if now != r['Hit@1']: print(r['qid'], r['Hit@1'], '->', now, q, flush=True)
print(f"chain-parsed queries: {n}; Hit@1 base {before:.0f} -> now {after:.0f}")
