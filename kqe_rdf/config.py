"""One typed configuration object for every knob a user may turn.

Values come from (lowest to highest): defaults, a TOML file (``kqe-rdf.toml``
in the working directory or ``$KQE_CONFIG``), ``KQE_*`` environment variables,
then command-line options, which map one-to-one to these fields.

>>> Settings().k
10
>>> Settings.load(env={"KQE_K": "20"}).k
20
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from .errors import KqeError


@dataclass(frozen=True)
class Settings:
    #: The knowledge-base directory (store, indexes, manifest).
    kb: Path = Path("data/kb/bio")
    #: Results per query.
    k: int = 10
    #: Neighbours listed per relation and direction in a node's document (STaRK's add_rel, capped).
    doc_neighbours_per_relation: int = 25
    #: Characters of a node document at most (documents are also truncated by the encoder).
    doc_max_chars: int = 6000
    #: Embedding model: a path to an ONNX file, or "minilm-int8" for the packaged all-MiniLM-L6-v2.
    embedding_model: str = "minilm-int8"
    #: Tokens per text the encoder sees (the packaged tokenizer says 128; the model takes 256).
    embedding_max_tokens: int = 256
    #: Texts per encoder batch (batches are formed from texts of similar length).
    embedding_batch_size: int = 32
    #: Candidates each side of a hybrid fusion contributes, and the RRF constant.
    hybrid_depth: int = 100
    rrf_k: int = 60
    #: RM3 pseudo-relevance feedback: feedback documents, expansion terms, weight of the original query.
    prf_docs: int = 10
    prf_terms: int = 10
    prf_original_weight: float = 0.5
    #: 4StepFocus: "soft" (rank by satisfied triplet paths) or "strict" (all triplets must hold).
    fourstep_mode: str = "soft"
    #: 4StepFocus: let the LLM rerank the top ``rerank_depth`` results (needs an LLM).
    rerank: bool = False
    rerank_depth: int = 10
    #: What to do with an edge whose end is not a node of the KB: "skip" (counted) or "fail".
    on_unknown_edge: str = "skip"
    #: The LLM: an OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama). With neither a base URL nor a
    #: model there is no LLM and LLM-based methods run their offline variants. OPENAI_BASE_URL and
    #: OPENAI_API_KEY are read too (below the TOML file and KQE_* variables). An empty model with a base URL
    #: means the first model the server lists; an empty base URL with a model means api.openai.com.
    llm_base_url: str = ""
    llm_model: str = ""
    llm_api_key: str = dataclasses.field(default="", repr=False)
    #: Seconds per request; retries on timeouts, connection errors, 429 and 5xx, with exponential backoff
    #: starting at llm_backoff seconds.
    llm_timeout: float = 60.0
    llm_max_retries: int = 4
    llm_backoff: float = 1.0
    #: Sampling temperature, and completion tokens per call (0: the server's default, max_tokens not sent).
    llm_temperature: float = 0.0
    llm_max_output_tokens: int = 0
    #: SQLite response cache, so evaluations are reproducible and re-runs free ("off" disables it).
    llm_cache: Path = Path("data/cache/llm.sqlite")
    #: Per-query budget that `LLM.budget()` opens: calls and prompt+completion tokens (0: unlimited).
    llm_max_calls_per_query: int = 0
    llm_max_tokens_per_query: int = 0

    def __post_init__(self) -> None:
        # Checked here, not where a value is first used, so a bad value fails before a long build starts.
        for name in ("k", "doc_neighbours_per_relation", "doc_max_chars", "embedding_max_tokens",
                     "embedding_batch_size", "hybrid_depth", "prf_docs", "prf_terms"):
            if getattr(self, name) < 1:
                raise KqeError(f"setting {name} must be at least 1, got {getattr(self, name)!r}")
        if self.rrf_k < 0:
            raise KqeError(f"setting rrf_k must not be negative, got {self.rrf_k!r}")
        if not 0.0 <= self.prf_original_weight <= 1.0:
            raise KqeError(f"setting prf_original_weight must be between 0 and 1, got {self.prf_original_weight!r}")
        if self.on_unknown_edge not in ("skip", "fail"):
            raise KqeError(f"setting on_unknown_edge must be 'skip' or 'fail', got {self.on_unknown_edge!r}")
        for name in ("llm_max_retries", "llm_max_output_tokens", "llm_max_calls_per_query",
                     "llm_max_tokens_per_query", "llm_backoff"):
            if getattr(self, name) < 0:
                raise KqeError(f"setting {name} must not be negative, got {getattr(self, name)!r}")
        if not self.llm_timeout > 0:
            raise KqeError(f"setting llm_timeout must be a positive number of seconds, got {self.llm_timeout!r}")
        if not 0.0 <= self.llm_temperature <= 2.0:
            raise KqeError(f"setting llm_temperature must be between 0 and 2, got {self.llm_temperature!r}")
        if self.llm_base_url and not self.llm_base_url.startswith(("http://", "https://")):
            raise KqeError(f"setting llm_base_url must be an http(s) URL such as http://localhost:8000/v1, "
                           f"got {self.llm_base_url!r}")

    @classmethod
    def load(cls, file: Path | None = None, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        # The OpenAI client's own variables, as users set them for every tool; the file and KQE_* beat them.
        values.update({name: env[key] for key, name in (("OPENAI_BASE_URL", "llm_base_url"),
                                                        ("OPENAI_API_KEY", "llm_api_key")) if env.get(key)})
        named = Path(file) if file is not None else Path(env["KQE_CONFIG"]) if "KQE_CONFIG" in env else None
        path = named or Path("kqe-rdf.toml")
        if named is not None and not named.is_file():
            raise KqeError(f"config file {named} not found" + ("" if file is not None else " (named by KQE_CONFIG)"))
        if path.is_file():
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except tomllib.TOMLDecodeError as exc:
                raise KqeError(f"{path}: not valid TOML ({exc})") from None
            section = data.get("kqe-rdf", data)
            if not isinstance(section, dict):
                raise KqeError(f"{path}: [kqe-rdf] must be a table of settings")
            values.update(section)
        for f in fields(cls):
            key = f"KQE_{f.name.upper()}"
            if key in env:
                values[f.name] = env[key]
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls._coerce(values)

    @classmethod
    def _coerce(cls, values: Mapping[str, object]) -> Settings:
        known = {f.name: f for f in fields(cls)}
        out: dict[str, object] = {}
        defaults = cls()
        for name, value in values.items():
            if name not in known:
                raise KqeError(f"unknown setting {name!r}; known: {', '.join(sorted(known))}")
            kind = type(getattr(defaults, name))
            if kind is bool:
                out[name] = _boolean(name, value)
                continue
            try:
                # No silent truncation or re-typing of TOML values: `k = 2.5` or `k = true` is an error.
                if isinstance(value, bool) or (kind is int and isinstance(value, float)) or (
                        kind is str and not isinstance(value, str)):
                    raise TypeError(value)
                out[name] = Path(str(value)) if issubclass(kind, Path) else kind(value)
            except (TypeError, ValueError):
                raise KqeError(f"setting {name} must be a {kind.__name__}, got {value!r}") from None
        return dataclasses.replace(defaults, **out)


def _boolean(name: str, value: object) -> bool:
    """true/false from TOML, or yes/no, true/false, 1/0, on/off from the environment."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise KqeError(f"setting {name} must be true or false, got {value!r}")
