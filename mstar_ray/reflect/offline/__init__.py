"""The offline reflector: generic, source-to-source mutations of a memory program.

With the ``offline`` backend there is no reflector LLM to write patches, yet the search must still
produce children that can score better than their parents. Each mutation here reads the program's
syntax tree only to find *where* to edit, then edits the original text at exact line/column spans:
comments and formatting elsewhere survive, and a child differs from its parent by a small readable
diff, described by a commit-message-like ``Mutation.description``.

Kinds (each a function ``kind(source, rng, *, avoid=())``, ``crossover`` also taking the donor's
source; deterministic given the generator; ``avoid`` lists programs a child must not equal):

- ``perturb_numbers``: scale one numeric tunable (an UPPER_CASE module constant, or an int literal
  used as a slice bound, keyword argument, comparison threshold or default inside the code).
- ``crossover``: take a consistent unit (methods, the whole ``KnowledgeBase``, a helper function, a
  schema dataclass or a constant's value) from another program of the population.
- ``edit_instruction``: add or drop one generic guidance sentence in an instruction constant.
- ``filter_writes``: stop ``write()`` from storing small talk (turns too short to hold a fact) or
  repeats (turns already stored word for word); both crowd facts out of a bounded ``read()``.
- ``order_by_recency``: flip whether memory keeps/returns the newest or the oldest entry first, which
  decides ties in favour of updated facts ("what does X do *now*").
- ``drop_long_lines``: leave lines of more than ``MAX_LINE_WORDS`` words out of what ``read()`` returns, before
  its cap, so one long passage (an episode's first observation) does not take the room of many short lines.

- ``date_aware_writes``: ``write()`` keeps each line's ``[date]`` header on the line (date-aware items);
  ``write_per_line``: memory is keyed by line (a turn), each stored under its ``[date]``.
- ``fuse_keyword_scores``: ``read()`` re-ranks what it found by fusing its order with a keyword order
  (hybrid retrieval), fetching more; ``cap_per_source``: at most k entries of one ``[date]`` source.
- ``quote_evidence``: a ``read()`` that asks its toolkit model to answer asks it for the evidence instead, so
  the answer step answers from what it is shown.
- ``second_read``: ``read()`` reads a second time for the person a question names by a relation ("the person who
  adopted Fennel"), with the name the first read states beside the question's own names.
- ``speaker_date_table``: ``write()`` also stores each line that states a speaker with its date in a SQLite table
  (the program's own ``toolkit.db``); ``read()`` keeps what it found and adds the person the query names' dated
  lines, newest first, within ``READ_LIMIT``.
- ``merge_relative``: take into the program what a program of another line gained by over their common ancestor
  (``ReflectionRequest.relatives``): its lines merged three ways, or its edit made again where they conflict.

``reflect`` (the ``offline`` reflector) chooses the edit from the parent's failures, their attributed stages
and its lineage, and never repeats a change that failed on that parent. ``propose`` (``offline-random``,
an ablation) picks a kind at random, honours the ablation switches, falls back to other kinds when one
does not apply, and never returns a program already in the population. Every program returned
passes ``check_source``, compiles, reads no undefined name and differs from its parent; otherwise
``NoMutation`` is raised.

The package: ``engine`` (the result type, text edits at AST spans, validity, shared AST lookups), ``names``
(free and bound names), one module per kind (``perturb``, ``crossover``, ``instructions``, ``writes``:
``filter_writes`` and ``order_by_recency``, which both decide what memory keeps; ``lines``: ``drop_long_lines``;
``dates``; ``ranking``; ``hops``: ``second_read``; ``evidence``: ``quote_evidence``; ``table``:
``speaker_date_table``; ``relatives``: ``merge_relative``), ``propose`` and ``reflective``.
"""

from mstar_ray.reflect.offline.crossover import crossover
from mstar_ray.reflect.offline.engine import READ_LIMIT, SCALE_FACTORS, Mutation, NoMutation
from mstar_ray.reflect.offline.instructions import GUIDANCE, edit_instruction
from mstar_ray.reflect.offline.lines import MAX_LINE_WORDS, drop_long_lines
from mstar_ray.reflect.offline.perturb import perturb_numbers
from mstar_ray.reflect.offline.propose import KIND_WEIGHTS, propose
from mstar_ray.reflect.offline.dates import date_aware_writes, write_per_line
from mstar_ray.reflect.offline.evidence import quote_evidence
from mstar_ray.reflect.offline.hops import second_read
from mstar_ray.reflect.offline.ranking import MAX_PER_SOURCE, cap_per_source, fuse_keyword_scores
from mstar_ray.reflect.offline.reflective import PLAYBOOK, failed_changes, reflect
from mstar_ray.reflect.offline.table import speaker_date_table
from mstar_ray.reflect.offline.writes import MIN_WRITE_WORDS, filter_writes, order_by_recency

__all__ = [
    "GUIDANCE", "KIND_WEIGHTS", "MAX_LINE_WORDS", "MAX_PER_SOURCE", "MIN_WRITE_WORDS", "PLAYBOOK", "READ_LIMIT",
    "SCALE_FACTORS", "Mutation", "NoMutation", "cap_per_source", "crossover", "date_aware_writes", "drop_long_lines",
    "edit_instruction", "failed_changes", "filter_writes", "fuse_keyword_scores", "order_by_recency",
    "perturb_numbers", "propose", "quote_evidence", "reflect", "second_read", "speaker_date_table",
    "write_per_line",
]
