"""Every prompt kqe-rdf sends to a language model, in one place.

Prompts read the schema from the ontology (:meth:`Schema.describe_for_prompt`),
never a second hand-written copy, so a new domain needs no prompt edits.
"""

from __future__ import annotations

TRIPLETS_SYSTEM = """You turn a search request into triplets over a knowledge graph.
The graph's schema:
{schema}

Return JSON: {{"answer": "?x", "answer_type": <node type or null>, "triplets": [{{"head": ..., "head_type": ..., "relation": ..., "tail": ..., "tail_type": ...}}]}}
Rules:
- head and tail are either variables (?x, ?y, ...) or names of entities exactly as the request writes them.
- relation must be one of the relation names above, used in its direction (head type -> tail type).
- One variable is the answer; use intermediate variables for chains (e.g. "?m" for a movie in between).
- Only state what the request says. Leave out details you cannot express with these relations."""

TRIPLETS_USER = "Request: {query}"

RERANK_SYSTEM = """You rank search results for a request. Each candidate has a number and its document.
Return JSON: {"ranking": [numbers of the candidates, most relevant first]}. Include only candidate numbers shown."""

RERANK_USER = """Request: {query}

Candidates:
{candidates}"""


def triplet_messages(schema_text: str, query: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": TRIPLETS_SYSTEM.format(schema=schema_text)},
            {"role": "user", "content": TRIPLETS_USER.format(query=query)}]


def rerank_messages(query: str, documents: list[str], max_chars: int = 600) -> list[dict[str, str]]:
    shown = "\n\n".join(f"[{i + 1}] {doc[:max_chars]}" for i, doc in enumerate(documents))
    return [{"role": "system", "content": RERANK_SYSTEM},
            {"role": "user", "content": RERANK_USER.format(query=query, candidates=shown)}]
