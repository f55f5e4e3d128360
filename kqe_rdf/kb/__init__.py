"""The knowledge-base layer: import records, convert them to RDF, store them, and build the indexes.

Importers (``importers/``) read sources into records; :mod:`.build` writes a KB folder (the Oxigraph
store, node documents, the Tantivy text index, dense vectors, hierarchies, the name index);
:class:`~kqe_rdf.kb.knowledge_base.KnowledgeBase` opens one. Nothing here imports the methods, the
service or the evaluation.
"""
