"""The language-model layer: the OpenAI-compatible client, its response cache, structured output and
the shared prompt rules. Methods import it; it imports only :mod:`kqe_rdf.core`.
"""
