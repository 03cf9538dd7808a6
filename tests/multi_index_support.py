"""Small indexes built at test time for the several-indexes tests: the sample corpus and a short garden text."""

from __future__ import annotations

from pathlib import Path

from indexer import IndexerConfig, SourceDocument, build_index, build_index_from_documents

SAMPLE = Path(__file__).resolve().parents[1] / "indexer" / "sample_corpus"
GARDEN = [
    ("Glasshouse history", "The Verrill Glasshouse was built in 1871 by the ironmaster Odile Verrill to keep orchids "
     "and tree ferns through the winter. Its cast-iron ribs were made at the Pellow foundry. In 1954 a storm broke "
     "four hundred panes and the curator Amos Quaile rebuilt the north wing with laminated glass."),
    ("Seed bank", "The Quaile Seed Bank stores the seeds of alpine plants in jars at minus twenty degrees. Amos Quaile "
     "founded it in 1962 after collecting saxifrage and gentian seeds on the Brevard ridge. Germination is tested "
     "every ten years; a jar whose seeds fail to sprout is replaced from the living collection."),
    ("Orchid collection", "The orchid collection holds slipper orchids, moth orchids and rare epiphytes from cloud "
     "forests. Odile Verrill bought the first slipper orchids from a nursery in Ghent. Misting pumps keep the "
     "humidity above eighty percent, and the orchids flower from February to May."),
]


def build_garden(out: Path) -> Path:
    docs = [SourceDocument(title=t, text=x) for t, x in GARDEN]
    build_index_from_documents(docs, out, config=IndexerConfig(chunk_size=300, chunk_overlap=20), progress=False)
    return out


def build_coop(out: Path) -> Path:
    build_index(SAMPLE, out, progress=False)
    return out
