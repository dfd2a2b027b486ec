"""A tiny 2WikiMultiHopQA-format data folder for the multi-hop tests."""

import json
from pathlib import Path

CORPUS = [
    ("Lothair II", "Lothair II was a king of Lotharingia. His mother was "
     "Ermengarde of Tours."),
    ("Ermengarde of Tours", "Ermengarde of Tours died on 20 March 851. She "
     "married Lothair I."),
    ("Lothair I", "Lothair I was an emperor. He married Ermengarde of "
     "Tours."),
    ("Aas Ka Panchhi", "Aas Ka Panchhi is a 1961 film directed by Mohan "
     "Kumar."),
    ("Phoolwari", "Phoolwari is a 1946 film."),
    ("Mohan Kumar (director)", "Mohan Kumar was an Indian film director. He "
     "directed Aas Ka Panchhi."),
    ("Tours", "Tours is a city in France."),
    ("Paris", "Paris is the capital of France."),
]
QUESTIONS = [
    {"id": "q-lothair", "question": "When did Lothair Ii's mother die?",
     "answer": "20 March 851", "question_type": "compositional",
     "evidence": [["Lothair II", "mother", "Ermengarde of Tours"],
                  ["Ermengarde of Tours", "date of death", "20 March 851"]]},
    {"id": "q-films", "question": "Which film was released first, Aas Ka "
     "Panchhi or Phoolwari?", "answer": "Phoolwari",
     "question_type": "comparison",
     "evidence": [["Aas Ka Panchhi", "publication date", "1961"],
                  ["Phoolwari", "publication date", "1946"]]},
    {"id": "q-director", "question": "Who directed Aas Ka Panchhi?",
     "answer": "Mohan Kumar", "question_type": "inference",
     "evidence": [["Aas Ka Panchhi", "director", "Mohan Kumar"],
                  ["Mohan Kumar", "occupation", "director"],
                  ["Nobody Known", "x", "y"]]},
]


def write(root: Path, evidence: bool = True, questions=QUESTIONS) -> Path:
  """``root/multihop/2wiki/{corpus,questions}.jsonl``; returns ``root``."""
  folder = root / "multihop" / "2wiki"
  folder.mkdir(parents=True, exist_ok=True)
  with open(folder / "corpus.jsonl", "w") as f:
    for title, text in CORPUS:
      f.write(json.dumps({"title": title, "text": text}) + "\n")
  with open(folder / "questions.jsonl", "w") as f:
    for q in questions:
      q = dict(q)
      if not evidence:
        q.pop("evidence")
      f.write(json.dumps(q) + "\n")
  return root
