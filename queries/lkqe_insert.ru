# LKQE: stores one query's triples as the named graph ?graph (in the KB's writable expansions store,
# never the read-only main store). The graph node records the query, method and time; each triple is a
# node with its head, relation and tail text, how it was made ("extracted" from a passage or "completed"
# by the LLM) and, for extracted ones, the passage it came from (prov:wasDerivedFrom; UNDEF otherwise).
PREFIX kqx: <https://w3id.org/kqe/expansion#>
PREFIX prov: <http://www.w3.org/ns/prov#>
PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>
INSERT {
  GRAPH ?graph {
    ?graph a kqx:ExpansionGraph ; kqx:query ?query ; kqx:method ?method ; kqx:model ?model ;
           prov:generatedAtTime ?time .
    ?triple a kqx:Triple ; kqx:head ?head ; kqx:relation ?relation ; kqx:tail ?tail ; kqx:origin ?origin ;
            kqx:position ?position ; prov:wasDerivedFrom ?passage .
  }
}
WHERE {
  #VALUES (?graph ?query ?method ?model ?time)
  #VALUES (?triple ?position ?head ?relation ?tail ?origin ?passage)
}
