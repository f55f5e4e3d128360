"""The embedding model (issue 28): the default encoder's bytes are verified, its tokenizer ships with kqe-rdf,
and a user's own ONNX encoder embeds a KB end to end — a KB remembers which encoder made its vectors.

The user's encoder here is a tiny real ONNX model built with the ``onnx`` package's helpers (an embedding
table looked up by token id) and a real ``tokenizers`` tokenizer.json; nothing is downloaded.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from kqe_rdf.core.config import Settings
from kqe_rdf.core.errors import KqeError
from kqe_rdf.kb.build import build_kb, embed_kb
from kqe_rdf.kb.embeddings import (MIXED_MODEL, PACKAGED, PACKAGED_MODEL, REQUANTIZED_MODEL, OnnxEncoder,
                                  _packaged_files, file_sha256, made_model, verified)
from kqe_rdf.kb.importers.jsonl import JsonlImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.kb.phrases import stored_phrase_vectors
from kqe_rdf.methods.retrieval import Dense

WORDS = ["[UNK]", "seizure", "fits", "heart", "cardiac", "rash", "skin"]


def tiny_encoder(folder: Path, dimension: int = 4) -> Path:
    """``model.onnx`` (token vectors = a fixed table looked up by id, masked) and ``tokenizer.json`` beside it."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder.mkdir(parents=True, exist_ok=True)
    table = np.random.default_rng(7).normal(size=(len(WORDS), dimension)).astype(np.float32)
    table[0] = 0.0  # unknown words (the rest of a node document) add nothing
    table[2] = table[1] + 0.05  # "fits" near "seizure"
    table[4] = table[3] + 0.05  # "cardiac" near "heart"
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["tokens"]),
         helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
         helper.make_node("Unsqueeze", ["maskf", "axis"], ["mask3"]),
         helper.make_node("Mul", ["tokens", "mask3"], ["last_hidden_state"])],
        "tiny",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", dimension])],
        [numpy_helper.from_array(table, "table"), numpy_helper.from_array(np.array([2], dtype=np.int64), "axis")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), folder / "model.onnx")
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder / "model.onnx"


@pytest.fixture(scope="module")
def tiny_kb(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("encoder")
    lines = [{"kind": "node", "id": "d1", "type": "Disease", "name": "seizure"},
             {"kind": "node", "id": "d2", "type": "Disease", "name": "heart"},
             {"kind": "node", "id": "d3", "type": "Disease", "name": "rash skin"}]
    (folder / "kb.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    build_kb(JsonlImporter([folder / "kb.jsonl"]), folder / "kb")
    return folder


DEFAULT, MATMUL, MIXED = PACKAGED[PACKAGED_MODEL], PACKAGED[REQUANTIZED_MODEL], PACKAGED[MIXED_MODEL]


def test_the_default_encoder_is_the_verified_packaged_one():
    model, tokenizer = _packaged_files()
    assert tokenizer.parent.name == "all-MiniLM-L6-v2" and "kqe_rdf" in tokenizer.parts
    assert (tokenizer.parent / "LICENSE").read_text().lstrip().startswith("Apache License")
    assert Settings().embedding.model == PACKAGED_MODEL == "minilm-int8"
    assert file_sha256(model) == DEFAULT["model_sha256"] != MATMUL["model_sha256"]
    encoder = OnnxEncoder.packaged()
    assert encoder.fingerprint["tokenizer_sha256"] == DEFAULT["tokenizer_sha256"] and encoder.dimension == 384
    assert encoder.model_id == "all-MiniLM-L6-v2-onnx-int8@256"


def test_the_requantized_model_is_made_from_the_pinned_export_by_a_script_anyone_can_run(tmp_path):
    # The script writes the same bytes the minilm-int8-matmul encoder loads, and says they are the pinned ones.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "kqe_rdf.kb.requantize", str(tmp_path / "model.onnx")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"sha256 {MATMUL['model_sha256']} (the pinned one)" in done.stdout
    assert file_sha256(tmp_path / "model.onnx") == MATMUL["model_sha256"] == file_sha256(made_model(REQUANTIZED_MODEL))
    # Its vectors are near the export's (the same model, its products quantized), but not the same.
    texts = ["seizures and microcephaly", "who directed the film Alien"]
    near = (OnnxEncoder.packaged().encode(texts) * OnnxEncoder.packaged(setting=REQUANTIZED_MODEL).encode(texts)).sum(1)
    assert (near > 0.95).all() and (near < 0.9999).all()


def test_the_mixed_model_is_made_by_the_same_script_and_is_nearer_the_export(tmp_path):
    # --mixed leaves the first three layers' FFN down-projections in float: the bytes minilm-int8-mixed loads.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "kqe_rdf.kb.requantize", str(tmp_path / "model.onnx"), "--mixed"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"sha256 {MIXED['model_sha256']} (the pinned one)" in done.stdout
    assert file_sha256(tmp_path / "model.onnx") == MIXED["model_sha256"] == file_sha256(made_model(MIXED_MODEL))
    texts = ["seizures and microcephaly", "A male patient presents with short stature, hypotonia, seizures, "
             "global developmental delay, microcephaly and a high palate. Which disease explains this?"]
    export = OnnxEncoder.packaged().encode(texts)
    mixed = (export * OnnxEncoder.packaged(setting=MIXED_MODEL).encode(texts)).sum(1)
    matmul = (export * OnnxEncoder.packaged(setting=REQUANTIZED_MODEL).encode(texts)).sum(1)
    assert (mixed > matmul).all() and (mixed < 0.99999).all()
    assert OnnxEncoder.packaged(setting=MIXED_MODEL).model_id == "all-MiniLM-L6-v2-onnx-int8-mixed@256"


def test_a_damaged_copy_of_the_made_model_is_made_again(tmp_path, monkeypatch):
    monkeypatch.setenv("KQE_CACHE_DIR", str(tmp_path))
    made_model.cache_clear()
    try:
        model = made_model(REQUANTIZED_MODEL)
        assert tmp_path in model.parents
        data = bytearray(model.read_bytes())
        data[len(data) // 2] ^= 0xFF
        model.write_bytes(bytes(data))
        made_model.cache_clear()
        assert file_sha256(made_model(REQUANTIZED_MODEL)) == MATMUL["model_sha256"]
    finally:
        made_model.cache_clear()


def test_a_corrupted_copy_of_the_model_is_refused_naming_the_file_and_both_hashes(tmp_path):
    model, _tokenizer = _packaged_files()
    copy = tmp_path / "model.onnx"
    shutil.copy(model, copy)
    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 0xFF
    copy.write_bytes(bytes(data))
    with pytest.raises(KqeError) as refused:
        verified(copy, DEFAULT["model_sha256"], "embedding model")
    message = str(refused.value)
    assert str(copy) in message and DEFAULT["model_sha256"] in message and file_sha256(copy) in message


def test_a_kb_keeps_the_packaged_encoder_of_its_vectors_until_it_is_embedded_again(tmp_path):
    # A KB built and embedded with the export: its vectors and relation phrases are the export's.
    lines = [{"kind": "node", "id": "p1", "type": "Product", "name": "Seizure alarm", "fields": {"description": "a "
              "watch that calls for help when its wearer has an epileptic fit"}},
             {"kind": "node", "id": "p2", "type": "Product", "name": "Heart rate strap"},
             {"kind": "node", "id": "acme", "type": "Brand", "name": "Acme"},
             {"kind": "edge", "head": "p1", "relation": "hasBrand", "tail": "acme"}]
    (tmp_path / "kb.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    export, matmul = Settings(embedding_model="minilm-int8"), Settings(embedding_model=REQUANTIZED_MODEL)
    build_kb(JsonlImporter([tmp_path / "kb.jsonl"]), tmp_path / "kb", export)
    kb = KnowledgeBase.open(tmp_path / "kb", matmul)  # the other packaged encoder configured
    assert kb.encoder_settings.embedding.model == "minilm-int8"  # relation phrases were made by the export ...
    assert kb.encoder.model_id == "all-MiniLM-L6-v2-onnx-int8@256" and stored_phrase_vectors(kb)  # ... and are read
    embed_kb(tmp_path / "kb", export)
    kb = KnowledgeBase.open(tmp_path / "kb", matmul)
    assert kb.encoder.fingerprint["model_sha256"] == PACKAGED["minilm-int8"]["model_sha256"]
    assert kb.document(Dense(kb, 3).search("pulse monitor")[0].iri).name == "Heart rate strap"
    # `kqe-rdf kb embed` with the other encoder configured moves the KB, vectors and relation phrases, to it ...
    done = embed_kb(tmp_path / "kb", matmul)
    assert done["new"] == 3 and done["encoder"]["model_sha256"] == MATMUL["model_sha256"]
    # ... which then reads it whatever packaged encoder is configured.
    kb = KnowledgeBase.open(tmp_path / "kb", export)
    assert kb.encoder.model_id == "all-MiniLM-L6-v2-onnx-int8-matmul@256" and stored_phrase_vectors(kb)
    assert kb.document(Dense(kb, 3).search("pulse monitor")[0].iri).name == "Heart rate strap"
    # A user's own encoder configured on it is still refused (only packaged encoders follow the KB).
    model = tiny_encoder(tmp_path / "tiny")
    with pytest.raises(KqeError, match="made by another encoder than the one configured"):
        KnowledgeBase.open(tmp_path / "kb", Settings(embedding_model=str(model))).encoder


def test_a_users_own_onnx_encoder_embeds_a_kb_end_to_end(tiny_kb, tmp_path):
    model = tiny_encoder(tmp_path / "tiny")
    settings = Settings(embedding_model=str(model), embedding_dimension=4)
    done = embed_kb(tiny_kb / "kb", settings)
    assert done["complete"] and done["encoder"]["model_sha256"] == file_sha256(model)
    manifest = json.loads((tiny_kb / "kb" / "manifest.json").read_text())
    assert manifest["embeddings"]["encoder"]["dimension"] == 4
    kb = KnowledgeBase.open(tiny_kb / "kb", settings)
    top = Dense(kb, 3).search("fits")
    assert kb.document(top[0].iri).name == "seizure"  # "fits" lies next to "seizure" in the tiny table


def test_searching_vectors_of_another_encoder_is_refused(tiny_kb, tmp_path):
    model = tiny_encoder(tmp_path / "tiny")
    embed_kb(tiny_kb / "kb", Settings(embedding_model=str(model)))
    kb = KnowledgeBase.open(tiny_kb / "kb")  # the default encoder
    with pytest.raises(KqeError, match="made by another encoder than the one configured"):
        Dense(kb, 3).search("fits")


@pytest.mark.parametrize("settings, message", [
    ({"embedding_dimension": 8}, "makes 4-dimensional vectors, not 8"),
    ({"embedding_tokenizer": "/nonexistent/tokenizer.json"}, "no tokenizer.json at /nonexistent"),
])
def test_a_misconfigured_encoder_says_what_is_wrong(tmp_path, settings, message):
    model = tiny_encoder(tmp_path / "tiny")
    with pytest.raises(KqeError, match=message):
        OnnxEncoder.from_settings(Settings(embedding_model=str(model), **settings))


def test_cls_pooling_and_no_normalisation_are_honoured(tmp_path):
    model = tiny_encoder(tmp_path / "tiny")
    mean = OnnxEncoder.from_settings(Settings(embedding_model=str(model))).encode(["rash skin"])[0]
    cls = OnnxEncoder.from_settings(Settings(embedding_model=str(model), embedding_pooling="cls",
                                             embedding_normalize=False)).encode(["rash skin"])[0]
    assert abs(np.linalg.norm(mean) - 1) < 1e-5 and not np.allclose(cls / np.linalg.norm(cls), mean)


def test_a_variant_of_the_requantized_model_leaves_the_named_matmuls_in_float(tmp_path):
    # bench/encoder_variants.py compares such variants (issue 52); the defaults still make the pinned bytes (above).
    import onnx

    from kqe_rdf.kb.embeddings import _packaged_files
    from kqe_rdf.kb.requantize import folded, requantize

    export, tokenizer = _packaged_files("minilm-int8")
    graph = onnx.load(folded(export, tmp_path / "float.onnx")).graph
    down = [n.name for n in graph.node if n.op_type == "MatMul" and n.input[0].startswith("gelu")]
    assert len(down) == 6  # one FFN down-projection per layer
    variant = requantize(export, tmp_path / "variant.onnx", exclude=down)
    nodes = onnx.load(variant).graph.node
    assert sorted(n.name for n in nodes if n.op_type == "MatMul" and n.input[0].startswith("gelu")) == sorted(down)
    assert sum(n.op_type == "MatMulInteger" for n in nodes) == 6 * 5  # Q, K, V, output and FFN up of 6 layers
    assert file_sha256(variant) != MATMUL["model_sha256"]
    texts = ["seizures and microcephaly", "who directed the film Alien"]
    near = (OnnxEncoder.packaged().encode(texts) * OnnxEncoder(variant, tokenizer).encode(texts)).sum(1)
    assert (near > 0.95).all()


def test_a_new_process_opens_the_encoder_from_its_kept_optimized_graph_with_the_same_vectors(tmp_path, monkeypatch):
    import onnxruntime as ort

    monkeypatch.setenv("KQE_CACHE_DIR", str(tmp_path))
    texts = ["seizures and microcephaly", "who directed the film Alien", "a camera for wildlife photography " * 30]
    first = OnnxEncoder.packaged()  # optimizes the export's graph and keeps it
    kept = list((tmp_path / "models" / "optimized").iterdir())
    assert len(kept) == 1 and kept[0].suffix == ".onnx" and kept[0].stat().st_size > 1_000_000
    again = OnnxEncoder.packaged()  # reads the kept graph, with nothing left to optimize
    # The vectors ONNX Runtime gives when it optimizes the export at its highest level in the process, as before.
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    plain = OnnxEncoder.packaged()
    plain.session = ort.InferenceSession(str(_packaged_files()[0]), sess_options=options,
                                         providers=["CPUExecutionProvider"])
    expected = plain.encode(texts)
    assert np.array_equal(first.encode(texts), expected) and np.array_equal(again.encode(texts), expected)
    assert first.fingerprint == again.fingerprint == plain.fingerprint  # the export's bytes, as the KB records them


def test_a_damaged_kept_graph_is_made_again_and_an_unwritable_cache_keeps_none(tmp_path, monkeypatch):
    monkeypatch.setenv("KQE_CACHE_DIR", str(tmp_path / "cache"))
    texts = ["seizures and microcephaly"]
    expected = OnnxEncoder.packaged().encode(texts)
    (kept,) = (tmp_path / "cache" / "models" / "optimized").iterdir()
    kept.write_bytes(b"not an ONNX graph")
    assert np.array_equal(OnnxEncoder.packaged().encode(texts), expected)
    assert kept.stat().st_size > 1_000_000  # written again, whole
    (tmp_path / "file").write_text("a file where the cache folder would be")
    monkeypatch.setenv("KQE_CACHE_DIR", str(tmp_path / "file"))
    assert np.array_equal(OnnxEncoder.packaged().encode(texts), expected)
