"""kqe-rdf: semi-structured retrieval over RDF knowledge graphs.

Imports here stay light so that ``kqe-rdf --help`` is instant; open a KB with
``kqe_rdf.kb.knowledge_base.KnowledgeBase.open(path)``.
"""

__version__ = "0.1.0"
