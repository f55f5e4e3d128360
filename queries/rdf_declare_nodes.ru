# After a raw RDF import: classes of text-bearing nodes become node classes, a node of no class gets the
# default class kqe:Entity (declared here only when some node needs it), properties linking two nodes become
# relations, and nodes with only skos:prefLabel get it as their name.
PREFIX kqe: <https://w3id.org/kqe/core#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
PREFIX skos: <http://www.w3.org/2004/02/skos/core#>
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
INSERT { ?class rdfs:subClassOf kqe:Node } WHERE {
  SELECT DISTINCT ?class WHERE { ?node a kqe:Node ; a ?class . FILTER(isIRI(?class) && ?class != kqe:Node) }
} ;
INSERT { ?node a kqe:Entity } WHERE {
  ?node a kqe:Node .
  FILTER NOT EXISTS { ?node a ?class . FILTER(?class != kqe:Node) }
} ;
INSERT { kqe:Entity rdfs:subClassOf kqe:Node ; rdfs:label "entity" ;
         rdfs:comment "A node the source gives no class (kqe-rdf's default class for plain RDF)." }
WHERE { FILTER EXISTS { ?node a kqe:Entity } } ;
INSERT { ?property rdfs:subPropertyOf kqe:relation } WHERE {
  SELECT DISTINCT ?property WHERE {
    ?head ?property ?tail . ?head a kqe:Node . ?tail a kqe:Node .
    FILTER(isIRI(?tail) && ?property != rdf:type)
  }
} ;
INSERT { ?node rdfs:label ?name } WHERE {
  ?node a kqe:Node ; skos:prefLabel ?name .
  FILTER NOT EXISTS { ?node rdfs:label ?any }
}
