"""Retrieval and answering methods over a KB: BM25/dense/hybrid stages (:mod:`.retrieval`),
4StepFocus (``fourstep/``), query expansion (``expansion/``) and question answering (``answering/``).
"""
