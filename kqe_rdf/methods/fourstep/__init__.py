"""4StepFocus: read a request as triplets, link its constants, compile the triplets to SPARQL, rank
what the SPARQL finds (:mod:`.pipeline`).
"""
