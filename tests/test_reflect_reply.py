from __future__ import annotations

import pytest

from mstar_ray.reflect.function_edit import EditError
from mstar_ray.reflect.reply import MAX_COMMIT_CHARS, ReflectorReply, parse_reply
from mstar_ray.reflect.v4a import apply_patch
from tests.conftest import seed_source

VECTOR = seed_source("vector_search")

PATCH = """*** Begin Patch
*** Update File: program.py
@@ def read(self, query: Query) -> str:
-        return "\\n\\n".join(docs)[:MAX_CONTEXT_CHARS]
+        return "\\n---\\n".join(docs)[:MAX_CONTEXT_CHARS]
*** End Patch
"""

DRAFT = PATCH.replace("---", "===")

REPLY = f"""The failed cases show that retrieved chunks run together, so the model cannot tell turns apart.

COMMIT_MESSAGE: Separate retrieved chunks with '---' so turns stay distinct.

{PATCH}"""


def test_reply_with_commit_message_and_patch() -> None:
    reply = parse_reply(REPLY)
    assert reply == ReflectorReply(
        "Separate retrieved chunks with '---' so turns stay distinct.", PATCH, None
    )
    assert apply_patch(VECTOR, reply.patch).source == VECTOR.replace("\\n\\n", "\\n---\\n")


def test_the_last_of_two_patches_wins() -> None:
    text = f"Commit message: first idea\n\n{DRAFT}\nOn second thought a plainer separator reads better.\n\n{PATCH}"
    reply = parse_reply(text)
    assert reply.patch == PATCH
    assert reply.commit_message == "first idea"


def test_the_commit_message_nearest_before_the_last_patch_wins() -> None:
    text = f"commit: use ===\n{DRAFT}\ncommit: use ---\n{PATCH}"
    assert parse_reply(text).commit_message == "use ---"


@pytest.mark.parametrize(
    "line",
    [
        "COMMIT_MESSAGE: Separate chunks",
        "Commit message: Separate chunks",
        "commit: Separate chunks",
        "**Commit message:** Separate chunks",
        "**Commit message**: `Separate chunks`",
        '## Commit message: "Separate chunks"',
        "- commit_message: Separate chunks",
    ],
)
def test_commit_message_labels(line: str) -> None:
    assert parse_reply(f"Some analysis first.\n{line}\n{PATCH}").commit_message == "Separate chunks"


def test_commit_message_on_the_line_after_its_label() -> None:
    assert parse_reply(f"Commit message:\n\nSeparate chunks\n\n{PATCH}").commit_message == "Separate chunks"


def test_without_a_label_the_first_prose_line_is_the_message() -> None:
    long = "Separate the chunks " + "very " * 60 + "clearly."
    reply = parse_reply(f"\n\n## {long}\n\nMore prose.\n{PATCH}")
    assert reply.commit_message == long[:MAX_COMMIT_CHARS]
    assert parse_reply(PATCH).commit_message == ""


def test_patch_inside_a_fence() -> None:
    text = f"COMMIT_MESSAGE: Separate chunks\n\n```diff\n{PATCH}```\n"
    reply = parse_reply(text)
    assert reply.patch == PATCH
    assert reply.commit_message == "Separate chunks"


def test_a_patch_cut_short_ends_with_its_fence_or_the_reply() -> None:
    cut = PATCH.replace("*** End Patch\n", "")
    assert parse_reply(f"```\n{cut}```\nDone.").patch == cut
    assert parse_reply(f"Separate chunks\n{cut}").patch == cut
    assert apply_patch(VECTOR, cut, tolerant=True).tolerances == [
        "missing_end: no '*** End Patch' line; the patch read to its last line"
    ]


def test_a_fenced_body_without_markers_is_taken_as_the_patch() -> None:
    body = PATCH.replace("*** Begin Patch\n", "").replace("*** End Patch\n", "")
    reply = parse_reply(f"commit: Separate chunks\n```diff\n{body}```")
    assert reply.patch == body
    assert apply_patch(VECTOR, reply.patch, tolerant=True).source == VECTOR.replace("\\n\\n", "\\n---\\n")


def test_full_source_fallback_takes_the_last_program_block() -> None:
    learner = seed_source("experience_learner")
    text = (
        "The helper below is unchanged:\n```python\ndef words(text):\n    return set(text.split())\n```\n"
        f"Here is the new program.\n```python\n{VECTOR}```\n"
        f"Commit message: Rewrite as a learner\n```python\n{learner}```\n"
    )
    reply = parse_reply(text)
    helper = "def words(text):\n    return set(text.split())\n"
    assert reply == ReflectorReply("Rewrite as a learner", None, learner, (helper, VECTOR, learner))


def test_full_source_without_label_takes_the_prose_line_before_it() -> None:
    reply = parse_reply(f"Use a larger top-k.\n```python\n{VECTOR}```")
    assert (reply.commit_message, reply.full_source) == ("Use a larger top-k.", VECTOR)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I think the read function should rank chunks by recency.",
        "--- a/program.py\n+++ b/program.py\n@@ -1 +1 @@\n-x\n+y\n",
    ],
)
def test_a_reply_without_blocks_has_no_pieces(text: str) -> None:
    reply = parse_reply(text)
    assert (reply.patch, reply.full_source, reply.code_blocks) == (None, None, ())


def test_definitions_are_code_blocks_not_a_program() -> None:
    reply = parse_reply("COMMIT_MESSAGE: shorter\n```python\ndef read(self, query):\n    return ''\n```")
    assert (reply.commit_message, reply.full_source) == ("shorter", None)
    assert reply.code_blocks == ("def read(self, query):\n    return ''\n",)


def test_bare_python_without_a_fence_is_read_as_one_block():
    """issue 15: asked for one python block, a 0.5B coder wrote the code and no opening fence."""
    from mstar_ray.reflect.edit_formats import read_edit
    from tests.conftest import seed_source

    parent = seed_source("vector_search")
    edit = read_edit(parent, 'COMMIT_MESSAGE = "eight chunks"\nTOP_K = 8\n```\n', "function")
    assert "TOP_K = 8" in edit.source and edit.commit_message == "eight chunks"
    assert edit.tolerances == ["read: the reply's code had no ``` fence"]
    cut = 'COMMIT_MESSAGE = "x"\ndef read(self, query):\n    return "".join(['
    with pytest.raises(EditError, match="not valid Python"):  # cut off at max_tokens: say where it stops
        read_edit(parent, cut, "function")
    assert parse_reply("COMMIT_MESSAGE: better\nI would return more chunks.").code_blocks == ()
