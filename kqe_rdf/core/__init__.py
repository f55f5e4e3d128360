"""The bottom layer: typed configuration, errors, progress reporting, where resource files live.

Everything else may import these; they import nothing of kqe_rdf above them.
"""
