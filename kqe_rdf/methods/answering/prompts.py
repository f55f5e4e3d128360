"""The prompts of question answering (kept beside the package until the lead folds them into ``kqe_rdf.llm.prompts``).

Both read the schema from the ontology (:meth:`Schema.describe_for_prompt`), never a copy.
"""

from __future__ import annotations

from ...llm.prompts import DATA_RULE, data

INTENT_SYSTEM = """You read a question to a knowledge graph and describe what it asks for.
The graph's schema:
{schema}

Return JSON: {{"answer_type": <one node type name above, or null>, "entities": [names of entities exactly as the question writes them], "relation": <the relation phrase the question asks about>, "time": [time cues such as years or dates], "location": [place names]}}
Only use words of the question; leave lists empty when the question has none."""

INTENT_USER = "Question: {question}"

ANSWER_SYSTEM = """You answer a question from numbered evidence only. Each piece is "[id] <data>sentence</data>".
Return JSON: {"answer": <the answer as the evidence writes it: an entity name or a value>, "evidence": [ids of the pieces that support the answer]}.
Cite only ids shown. If the evidence does not answer the question, return {"answer": null, "evidence": []}.
""" + DATA_RULE

ANSWER_USER = """Question: {question}
{hint}
Evidence:
{evidence}"""


def intent_messages(schema_text: str, question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": INTENT_SYSTEM.format(schema=schema_text)},
            {"role": "user", "content": INTENT_USER.format(question=question)}]


def answer_messages(question: str, pieces: list[tuple[str, str]], answer_type: str | None,
                    max_chars: int = 300) -> list[dict[str, str]]:
    shown = "\n".join(f"[{i}] {data(text[:max_chars])}" for i, text in pieces)
    hint = f"The answer is a {answer_type}.\n" if answer_type else ""
    return [{"role": "system", "content": ANSWER_SYSTEM},
            {"role": "user", "content": ANSWER_USER.format(question=question, hint=hint, evidence=shown)}]
