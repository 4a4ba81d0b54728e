from __future__ import annotations

import random

import pytest

from mstar_ray.reflect.v4a import MAX_ERROR_CHARS, PatchError, PatchResult, apply_patch, make_patch
from tests.conftest import ROOT, SEEDS, seed_source

# The patch format is tested against one fixed program (the first vector_search seed), so that its line
# numbers do not move when the seed library is revised.
VECTOR = (ROOT / "tests" / "fixtures" / "seeds_v1" / "vector_search.py").read_text()
READ_RETURN = '        return "\\n\\n".join(docs)[:MAX_CONTEXT_CHARS]'
NEW_RETURN = '        return "\\n---\\n".join(docs)[:MAX_CONTEXT_CHARS]'
VECTOR_NEW_READ = VECTOR.replace(READ_RETURN, NEW_RETURN)

ONE_HUNK = f"""*** Begin Patch
*** Update File: program.py
@@     def read(self, query: Query) -> str:
         found = self.collection.query(query_texts=[query.query], n_results=min(TOP_K, self.count))
         docs = found["documents"][0]
-{READ_RETURN}
+{NEW_RETURN}
*** End Patch
"""

# Two helpers with the same body: only an anchor tells which one a hunk means.
TWINS = """import re

class KnowledgeBase:
    def __init__(self, toolkit):
        self.facts = []

    def _keys(self, text):
        words = set(re.findall(r"[a-z0-9]+", text.lower()))
        if not words:
            return []
        return sorted(words)

    def _query_keys(self, text):
        words = set(re.findall(r"[a-z0-9]+", text.lower()))
        if not words:
            return []
        return sorted(words)

    def read(self, query):
        return "\\n".join(self.facts)
"""

TWINS_HUNK = """         words = set(re.findall(r"[a-z0-9]+", text.lower()))
         if not words:
-            return []
+            return ["*"]
         return sorted(words)
*** End Patch
"""


def names(result: PatchResult) -> list[str]:
    return [note.split(":")[0] for note in result.tolerances]


# ---------------------------------------------------------------------------------------------------
# Strict reading
# ---------------------------------------------------------------------------------------------------


def test_one_hunk_update_of_read() -> None:
    assert apply_patch(VECTOR, ONE_HUNK) == PatchResult(VECTOR_NEW_READ, 1, 0, [])


def test_spec_example_unindented_anchor_and_no_context() -> None:
    patch = f"""*** Begin Patch
*** Update File: program.py
@@ def read(self, query: Query) -> str:
-{READ_RETURN}
+{NEW_RETURN}
*** End Patch"""
    assert apply_patch(VECTOR, patch).source == VECTOR_NEW_READ


def test_nested_anchors_place_a_pure_insertion() -> None:
    patch = """*** Begin Patch
*** Update File: memory.py
@@ class KnowledgeBase:
@@     def read(self, query: Query) -> str:
+        query = Query(query.query.strip())
*** End Patch
"""
    expected = VECTOR.replace(
        "    def read(self, query: Query) -> str:\n",
        "    def read(self, query: Query) -> str:\n        query = Query(query.query.strip())\n",
    )
    assert apply_patch(VECTOR, patch) == PatchResult(expected, 1, 0, [])


def test_multi_hunk_update() -> None:
    patch = f"""*** Begin Patch
*** Update File: program.py
@@
+import re
 from dataclasses import dataclass, field
 
 COMMIT_MESSAGE = "Seed: vector search over raw-text chunks (top-5, no LLM in read)."
@@
 CHUNK_CHARS = 500
-TOP_K = 5
+TOP_K = 8
 MAX_CONTEXT_CHARS = 3000
@@ def read(self, query: Query) -> str:
         docs = found["documents"][0]
-{READ_RETURN}
+        docs = [re.sub(r"\\s+", " ", doc) for doc in docs]
+{NEW_RETURN}
*** End Patch
"""
    expected = (
        VECTOR.replace("from dataclasses", "import re\nfrom dataclasses")
        .replace("TOP_K = 5", "TOP_K = 8")
        .replace(READ_RETURN, '        docs = [re.sub(r"\\s+", " ", doc) for doc in docs]\n' + NEW_RETURN)
    )
    result = apply_patch(VECTOR, patch)
    assert result == PatchResult(expected, 3, 0, [])
    compile(result.source, "program.py", "exec")


def test_anchor_disambiguates_repeated_context() -> None:
    anchored = "*** Begin Patch\n*** Update File: program.py\n@@ def _query_keys(self, text):\n" + TWINS_HUNK
    bare = "*** Begin Patch\n*** Update File: program.py\n@@\n" + TWINS_HUNK
    second = TWINS.rsplit("return []", 1)
    assert apply_patch(TWINS, anchored).source == 'return ["*"]'.join(second)
    # Without the anchor the first match wins, as with the reference tool.
    assert apply_patch(TWINS, bare).source == TWINS.replace("return []", 'return ["*"]', 1)


def test_end_of_file_marker_matches_at_the_end_first() -> None:
    source = "def f():\n    return 1\n\n\ndef g():\n    return 1\n"
    patch = "*** Begin Patch\n*** Update File: program.py\n@@\n-    return 1\n+    return 2\n*** End of File\n*** End Patch\n"
    assert apply_patch(source, patch).source == "def f():\n    return 1\n\n\ndef g():\n    return 2\n"


def test_missing_context_names_hunk_patch_line_and_nearest_program_line() -> None:
    patch = f"""*** Begin Patch
*** Update File: program.py
@@
-TOP_K = 5
+TOP_K = 8
@@ def read(self, query: Query) -> str:
         docs = found["docs"][0]
-{READ_RETURN}
+{NEW_RETURN}
*** End Patch
"""
    with pytest.raises(PatchError) as caught:
        apply_patch(VECTOR, patch)
    message = str(caught.value)
    assert message.startswith("hunk 2 (patch line 6)")
    assert "patch line 7" in message
    assert 'found["docs"][0]' in message  # the lines sought
    assert "nearest program line is 68: '        docs = found[\"documents\"][0]'" in message
    assert len(message) < MAX_ERROR_CHARS


def test_partly_matching_context_says_where_it_breaks() -> None:
    patch = f"""*** Begin Patch
*** Update File: program.py
@@
         docs = found["documents"][0]
-        return "\\n".join(docs)[:MAX_CONTEXT_CHARS]
+{NEW_RETURN}
*** End Patch
"""
    with pytest.raises(
        PatchError, match=r"Patch line 4 = program line 68, but patch line 5 .* does not match"
    ) as caught:
        apply_patch(VECTOR, patch)
    assert f"program line 69 is {READ_RETURN!r}" in str(caught.value)


def test_hunks_out_of_order_are_explained() -> None:
    patch = f"""*** Begin Patch
*** Update File: program.py
@@
-{READ_RETURN}
+{NEW_RETURN}
@@
-TOP_K = 5
+TOP_K = 8
*** End Patch
"""
    with pytest.raises(
        PatchError, match=r"(?s)hunk 2 .* occur at program line 20, before where this hunk's search"
    ):
        apply_patch(VECTOR, patch)


def test_missing_anchor_is_fatal_in_strict_mode() -> None:
    patch = ONE_HUNK.replace("def read(self, query: Query)", "def reed(self, query: Query)")
    with pytest.raises(
        PatchError,
        match=r"hunk 1 \(patch line 3\): anchor .*def reed.* nearest program line is 64: '    def read",
    ):
        apply_patch(VECTOR, patch)


def test_fuzz_on_trailing_whitespace_keeps_the_program_text() -> None:
    source = VECTOR.replace('docs = found["documents"][0]\n', 'docs = found["documents"][0]   \n')
    result = apply_patch(source, ONE_HUNK)
    assert (result.fuzz, result.tolerances) == (1, [])
    assert result.source == source.replace(READ_RETURN, NEW_RETURN)


def test_indentation_fuzz_is_accepted_for_a_pure_deletion() -> None:
    patch = "*** Begin Patch\n*** Update File: program.py\n@@\n-  if not pieces:\n-   return\n*** End Patch"
    result = apply_patch(VECTOR, patch)
    assert result.fuzz == 2
    assert result.source == VECTOR.replace("        if not pieces:\n            return\n", "")


def test_blank_lines_before_end_patch_are_layout() -> None:
    patch = ONE_HUNK.replace("*** End Patch", "\n\n*** End Patch")
    assert apply_patch(VECTOR, patch) == PatchResult(VECTOR_NEW_READ, 1, 0, [])


def test_add_file_replaces_the_program() -> None:
    learner = seed_source("experience_learner")
    patch = "*** Begin Patch\n*** Add File: program.py\n" + "".join(
        f"+{line}\n" for line in learner.splitlines()
    )
    assert apply_patch(VECTOR, patch + "*** End Patch\n") == PatchResult(learner, 1, 0, [])


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (
            "*** Update File: program.py\n@@\n-TOP_K = 5\n+TOP_K = 8\n",
            r"must start with a line '\*\*\* Begin Patch'",
        ),
        ("```\n*** Begin Patch\n*** End Patch\n```", r"remove the ``` fence"),
        ("", "the patch is empty"),
        ("*** Begin Patch\n*** Delete File: program.py\n*** End Patch", "Delete File' is not allowed"),
        (
            "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** Update File: b.py\n@@\n-x\n+y\n*** End Patch",
            r"patch line 6: a second file section",
        ),
        (
            "*** Begin Patch\n@@\n-TOP_K = 5\n+TOP_K = 8\n*** End Patch",
            r"patch line 2: expected '\*\*\* Update File",
        ),
        ("*** Begin Patch\n*** Update File: program.py\n*** End Patch", "no hunks"),
        ("*** Begin Patch\n*** Update File: program.py\n@@\n TOP_K = 5\n*** End Patch", "changes nothing"),
        (
            "*** Begin Patch\n*** Update File: program.py\n@@\nTOP_K = 5\n+X = 1\n*** End Patch",
            r"hunk 1 \(patch line 4\): 'TOP_K = 5' starts with neither",
        ),
        ("*** Begin Patch\n*** Update File: p.py\n@@\n-A\n*** Move to: q.py\n*** End Patch", "unexpected"),
    ],
)
def test_malformed_patches(patch: str, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        apply_patch(VECTOR, patch)


def test_error_messages_stay_short() -> None:
    long_line = "x = '" + "y" * 400 + "'"
    patch = (
        "*** Begin Patch\n*** Update File: program.py\n@@\n"
        + f" {long_line}\n" * 40
        + "+z = 1\n*** End Patch"
    )
    with pytest.raises(PatchError) as caught:
        apply_patch(VECTOR, patch)
    assert len(str(caught.value)) <= MAX_ERROR_CHARS


# ---------------------------------------------------------------------------------------------------
# Tolerant reading: mistakes of small models
# ---------------------------------------------------------------------------------------------------

BODY = f"""         docs = found["documents"][0]
-{READ_RETURN}
+{NEW_RETURN}
"""


def wrap(body: str, head: str = "@@") -> str:
    return f"*** Begin Patch\n*** Update File: program.py\n{head}\n{body}*** End Patch\n"


WITH_TOP_K_8 = VECTOR_NEW_READ.replace("TOP_K = 5", "TOP_K = 8")
GUARD = "        if self.count == 0:"
REPEATED_ANCHOR = """     def read(self, query: Query) -> str:
-        if self.count == 0:
+        if not self.count:
"""
SHIFTED_LEFT = (
    BODY.replace(" " * 9 + "docs", " " * 8 + "docs")
    .replace("-        ", "-       ")
    .replace("+        ", "+       ")
)
SHIFTED_RIGHT = (
    BODY.replace(" " * 9 + "docs", " " * 10 + "docs")
    .replace("-        ", "-         ")
    .replace("+        ", "+         ")
)
UNPREFIXED = "CHUNK_CHARS = 500\n-TOP_K = 5\n+TOP_K = 8\nMAX_CONTEXT_CHARS = 3000\n@@\n" + BODY
DIFF_HEADER = "*** Update File: program.py\n--- a/program.py\n+++ b/program.py\n"

# case: (patch, expected program, names of the tolerances that must be reported)
SMALL_MODEL_MISTAKES = {
    "copied placeholder": (wrap(BODY, "@@ ... @@"), VECTOR_NEW_READ, ["placeholder_anchor"]),
    "unified-diff numbers": (wrap(BODY, "@@ -66,4 +66,4 @@"), VECTOR_NEW_READ, ["diff_line_numbers"]),
    "numbers then function": (
        wrap(BODY, "@@ -66,4 +66,4 @@ def read(self, query: Query) -> str:"),
        VECTOR_NEW_READ,
        ["diff_line_numbers"],
    ),
    "truncated anchor between @@": (wrap(BODY, "@@ def read... @@"), VECTOR_NEW_READ, ["placeholder_anchor"]),
    "anchor not in the program": (
        wrap(BODY, "@@ def retrieve(self, query):"),
        VECTOR_NEW_READ,
        ["anchor_dropped"],
    ),
    "prefix replaces a space": (wrap(SHIFTED_LEFT), VECTOR_NEW_READ, ["indentation", "reindent"]),
    "space after the prefix": (wrap(SHIFTED_RIGHT), VECTOR_NEW_READ, ["indentation", "reindent"]),
    "context pasted without prefix": (wrap(UNPREFIXED), WITH_TOP_K_8, ["unprefixed_context"]),
    "indented context pasted without prefix": (wrap(BODY[1:]), VECTOR_NEW_READ, ["indentation"]),
    "function added with shifted lines": (
        wrap(
            "       chunks.append(current[:size])\n   return chunks\n+\n+\n+def dedupe(items):\n+   return 1\n"
        ),
        VECTOR.replace("    return chunks\n", "    return chunks\n\n\ndef dedupe(items):\n    return 1\n"),
        ["indentation", "reindent"],
    ),
    "no markers": (
        f"*** Update File: program.py\n@@\n{BODY}",
        VECTOR_NEW_READ,
        ["missing_begin", "missing_end"],
    ),
    "fenced and introduced": (
        f"Here is the patch:\n```diff\n{wrap(BODY)}```\n",
        VECTOR_NEW_READ,
        ["fence", "outside_text"],
    ),
    "no file header": ("*** Begin Patch\n@@\n" + BODY + "*** End Patch", VECTOR_NEW_READ, ["missing_header"]),
    "anchor repeated as context": (
        wrap(REPEATED_ANCHOR, "@@     def read(self, query: Query) -> str:"),
        VECTOR.replace(GUARD, "        if not self.count:"),
        ["anchor_repeated"],
    ),
    "unified-diff file header": (
        wrap(BODY).replace("*** Update File: program.py\n", DIFF_HEADER),
        VECTOR_NEW_READ,
        ["diff_file_header"],
    ),
}


@pytest.mark.parametrize("case", SMALL_MODEL_MISTAKES)
def test_small_model_mistakes_fail_strictly_and_apply_tolerantly(case: str) -> None:
    patch, expected, expected_names = SMALL_MODEL_MISTAKES[case]
    with pytest.raises(PatchError):
        apply_patch(VECTOR, patch)
    result = apply_patch(VECTOR, patch, tolerant=True)
    assert result.source == expected
    assert sorted(set(names(result))) == sorted(expected_names), result.tolerances
    compile(result.source, "program.py", "exec")


def test_tolerant_reading_of_a_valid_patch_names_no_fix() -> None:
    assert apply_patch(VECTOR, ONE_HUNK, tolerant=True) == apply_patch(VECTOR, ONE_HUNK)


def test_added_lines_off_by_one_are_reindented_only_when_tolerant() -> None:
    patch = wrap(f"""         docs = found["documents"][0]
-{READ_RETURN}
+       docs = sorted(docs, key=len)
+{NEW_RETURN[1:]}
""")
    strict = apply_patch(VECTOR, patch)  # a faithful reading keeps the broken indentation
    with pytest.raises(IndentationError):
        compile(strict.source, "program.py", "exec")
    tolerant = apply_patch(VECTOR, patch, tolerant=True)
    assert names(tolerant) == ["reindent"]
    assert tolerant.source == VECTOR.replace(
        READ_RETURN, "        docs = sorted(docs, key=len)\n" + NEW_RETURN
    )


def test_tolerance_does_not_reindent_bracket_continuations() -> None:
    patch = wrap("""         docs = found["documents"][0]
+        docs = sorted(
+            docs,
+                 key=len,
+        )
""")
    result = apply_patch(VECTOR, patch, tolerant=True)
    assert result.tolerances == []
    assert "\n                 key=len,\n" in result.source


def test_tolerant_reading_still_reports_missing_context() -> None:
    with pytest.raises(PatchError, match=r"(?s)hunk 1 .*nearest program line is 68"):
        apply_patch(VECTOR, wrap(BODY.replace("documents", "docs"), "@@ ... @@"), tolerant=True)


# ---------------------------------------------------------------------------------------------------
# Generating patches
# ---------------------------------------------------------------------------------------------------

POOL = [
    "",
    "",
    "        return",
    '        return ""',
    "    return None",
    "pass",
    "        self.count += 1",
    "    def read(self, query: Query) -> str:",
    "# a comment",
]


def random_edit(lines: list[str], rng: random.Random) -> list[str]:
    """Deletions, insertions and replacements, often at the very start or end, often of lines that
    already occur elsewhere (blank lines, returns), so that context is ambiguous."""
    lines = list(lines)
    for _ in range(rng.randint(1, 5)):
        where = rng.choice([0, len(lines), rng.randint(0, len(lines))])
        size = rng.randint(1, 3)
        op = rng.choice(["delete", "insert", "replace"])
        fresh = [rng.choice(POOL + lines) if lines else rng.choice(POOL) for _ in range(size)]
        if op == "delete":
            del lines[where : where + size]
        elif op == "insert":
            lines[where:where] = fresh
        else:
            lines[where : where + size] = fresh
    return lines


def text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def hunk_count(patch: str) -> int:
    lines = patch.splitlines()
    return sum(
        line.startswith("@@") and not before.startswith("@@") for before, line in zip([""] + lines, lines)
    )


@pytest.mark.parametrize("seed_file", sorted(path.name for path in SEEDS.glob("*.py")))
@pytest.mark.parametrize("context", [3, 1, 0])
def test_make_patch_round_trips_random_edits_of_seeds(seed_file: str, context: int) -> None:
    old = (SEEDS / seed_file).read_text()
    rng = random.Random(f"{seed_file}-{context}")
    checked = 0
    while checked < 120:
        new = text(random_edit(old.splitlines(), rng))
        if new == old:
            continue
        patch = make_patch(old, new, context=context)
        assert apply_patch(old, patch) == PatchResult(new, hunk_count(patch), 0, []), patch
        assert apply_patch(old, patch, tolerant=True) == apply_patch(old, patch), patch
        checked += 1


def test_make_patch_round_trips_repetitive_text() -> None:
    rng = random.Random(7)
    for _ in range(400):
        old = text([rng.choice(["", "return", "x", "    return"]) for _ in range(rng.randint(0, 25))])
        new = text(random_edit(old.splitlines(), rng))
        if new == old:
            continue
        patch = make_patch(old, new, context=rng.choice([0, 1, 2, 3]))
        assert apply_patch(old, patch).source == new, (old, new, patch)
        assert apply_patch(old, patch, tolerant=True) == apply_patch(old, patch), (old, new, patch)


def test_make_patch_anchors_an_ambiguous_hunk() -> None:
    new = 'return ["*"]'.join(TWINS.rsplit("return []", 1))
    patch = make_patch(TWINS, new, context=1)
    assert "\n@@ def _query_keys(self, text):\n" in patch
    assert apply_patch(TWINS, patch).source == new


def test_make_patch_marks_the_end_of_file() -> None:
    patch = make_patch(VECTOR, VECTOR + "\n\ndef helper():\n    return None\n")
    assert patch.endswith("*** End of File\n*** End Patch\n")


def test_make_patch_from_an_empty_program() -> None:
    assert apply_patch("", make_patch("", VECTOR)).source == VECTOR


def test_make_patch_rejects_empty_and_newline_only_changes() -> None:
    with pytest.raises(PatchError, match="empty change"):
        make_patch(VECTOR, VECTOR)
    with pytest.raises(PatchError, match="newline"):
        make_patch(VECTOR, VECTOR.rstrip("\n"))
