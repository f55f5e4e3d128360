"""The knowledge service: the starlette app (SPARQL protocol, REST, web page), its worker processes,
search inside SPARQL, the SPARQL guard, and links to external knowledge graphs.
"""
