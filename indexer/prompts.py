"""Prompts of the model-based indexer (written for graphroute, in the spirit of GraphRAG's).

Each prompt puts its instructions in the system message and the data in the last user message, and asks
for one JSON object (parsed by `engines.models.structured.complete_json`, which repairs near-JSON).
"""

from __future__ import annotations

EXTRACT_SYSTEM = """You build a knowledge graph from documents.
Given a text, identify every entity of the requested types and every relationship between those entities.

For each entity give:
- "name": the entity's name as written in the text, capitalised
- "type": one of {entity_types}
- "description": a comprehensive description of the entity's attributes and activities, using only the text

For each pair of clearly related entities give:
- "source" and "target": entity names exactly as in your entity list
- "description": why the two entities are related, using only the text
- "strength": an integer from 1 (weak) to 10 (strong) for how strong the relationship is

Keep names in the language of the text. Reply with ONLY one JSON object:
{{"entities": [{{"name": "...", "type": "...", "description": "..."}}],
 "relationships": [{{"source": "...", "target": "...", "description": "...", "strength": 5}}]}}"""

EXTRACT_USER = """Entity types: {entity_types}
Text:
{text}"""

GLEAN_USER = (
    "MANY entities and relationships were missed in the last extraction. Add them now, in the same JSON format, "
    "listing ONLY the new entities and relationships."
)

LOOP_USER = (
    "It appears some entities and relationships may still have been missed. Answer Y if there are still entities "
    "or relationships that need to be added, or N if there are none. Answer with a single letter."
)

CLAIMS_SYSTEM = """You extract claims from documents for a knowledge graph.
A claim is a statement about an entity (the subject), possibly involving another entity (the object), such
as a commitment, a risk, an incident, a decision, a dispute or a result. For each claim give:
- "subject": the subject entity's name, capitalised
- "object": the object entity's name, capitalised, or "NONE"
- "type": a short category in capitals, e.g. RISK, COMMITMENT, INCIDENT, DISPUTE, FINANCING
- "status": TRUE, FALSE or SUSPECTED
- "start_date" and "end_date": ISO 8601 dates (YYYY-MM-DD) when the text gives them, otherwise null
- "description": one or two sentences explaining the claim and the evidence for it
- "source_text": the quote from the text that supports the claim

Reply with ONLY one JSON object: {"claims": [ ... ]} (an empty list when there are no claims)."""

CLAIMS_USER = """Entities of interest: {entities}
Text:
{text}"""

SUMMARIZE_SYSTEM = """You write one comprehensive description of an entity or a relationship from several partial
descriptions. Resolve contradictions, keep every distinct fact, write in the third person, name the entity, and
keep it under {max_words} words. Reply with the description only."""

SUMMARIZE_USER = """Name: {name}
Descriptions:
{descriptions}"""

REPORT_SYSTEM = """You write a community report about a group of related entities in a knowledge graph, for
decision makers. Use only the data tables provided.

Reply with ONLY one JSON object with these fields:
- "title": a short, specific name for the community that names its key entities
- "summary": an executive summary of the community's structure, how the entities relate, and what matters
- "rating": a float from 0 to 10, the IMPACT severity of the community (how important it is)
- "rating_explanation": one sentence explaining the rating
- "findings": 3 to 8 key insights, each {{"summary": "short headline", "explanation": "several sentences"}}

Ground each explanation in the data and end it with references such as
[Data: Entities (1, 2); Relationships (3, 4)], using the id column of the tables (at most 5 ids per table,
then "+more").

{context}"""

REPORT_USER = "Write the community report for community {community} as JSON."
