"""Supervision from unlabelled history (MemSteer, ``mstar-ray supervise``): raw texts alone, no questions and no
answers, turned into a jsonl question task whose every question carries verified evidence.

The pipeline (``pipeline``): the texts' pieces (a text's evidence units, or the text) are grouped into small
connected bundles (``bundles``); for each, an author first writes an *answer plan* (the facts, each quoted from
a cited piece, and how they combine), which a programmatic check accepts or rejects (``plan``); then the
question, from the checked plan; then a blind reader, given only the question, the answer type and the cited
pieces, must find it answerable, reach the same normalised answer and cite every evidence piece. What fails a
step is dropped and counted by reason. The author is a model (``llm_author``) or the offline templates
(``offline_author``), which need no model and are labelled as such in everything they produce.
"""
