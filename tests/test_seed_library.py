"""The seed library: every seed is a valid program that runs in a real sandbox under the contract's limits
(empty memory, writes, reads, a toolkit LLM that fails or talks nonsense); names and paths resolve from any
folder; a seed that breaks the contract stops a run before it starts; SelfMem's model-written SQL can only
read."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml

from mstar_ray import seeds as library
from mstar_ray.agent.offline import OfflineBackend
from mstar_ray.cli import main
from mstar_ray.config_file import ConfigError
from mstar_ray.contract import check_source, inspect_program
from mstar_ray.driver.resume import merge_resume_config
from mstar_ray.embedding.hashing import HashingEmbedder
from mstar_ray.program_id import program_id
from mstar_ray.reflect.offline import propose
from mstar_ray.run_config import RunConfig, SeedsBreakContract, load_run_config, resolve_seeds
from mstar_ray.sandbox_host.process import Sandbox
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
from mstar_ray.families.task_registry import load_task
from tests.conftest import HOSTILE, SEEDS

NAMES = [seed.name for seed in library.LIBRARY]
LIMITS = SandboxLimits(call_timeout_s=30.0)
# The paper's seeds are identified by their content: a change to one is a new version in the catalogue.
PAPER_SEED_IDS = {"vector_search": (2, "33511b947b223feb"), "llm_summarizer": (2, "56f91e3d72518900"),
                  "experience_learner": (1, "2832913941906759")}


def source(name: str) -> str:
    return library.entry(name).path.read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------------
# the catalogue and the programs
# --------------------------------------------------------------------------------------------------


def test_the_catalogue_names_every_program_file_and_nothing_else():
    assert sorted(p.stem for p in library.PROGRAMS.glob("*.py")) == sorted(NAMES)
    assert len(set(NAMES)) == len(NAMES)
    assert set(library.PAPER_SEEDS) <= set(NAMES)
    assert all(seed.idea and seed.source for seed in library.LIBRARY)
    # the checkout's seeds/ is the same folder, so seeds/NAME.py paths keep working
    assert SEEDS.resolve() == library.PROGRAMS


def test_a_paper_seed_changes_only_with_its_version():
    assert {name: (library.entry(name).version, program_id(source(name))) for name in library.PAPER_SEEDS} \
        == PAPER_SEED_IDS
    assert all(seed.changes for seed in library.LIBRARY if seed.version > 1)


def test_a_run_keeps_the_seed_version_it_started_on(tmp_path):
    from mstar_ray.driver.run_dir import RunDir
    from mstar_ray.state.candidate import Seed

    earlier = source("vector_search").replace("CHUNK_CHARS = 500", "CHUNK_CHARS = 400")  # as if an older version
    RunDir(tmp_path).write_seeds([Seed(name="vector_search", source=earlier)])
    assert [s.source for s in RunDir(tmp_path).read_seeds()] == [earlier]


@pytest.mark.parametrize("name", NAMES)
def test_every_seed_passes_the_contract_and_says_where_it_comes_from(name):
    program = source(name)
    assert check_source(program) == []
    docstring = program.split('"""')[1]
    if name not in library.PAPER_SEEDS:
        assert "Left out" in docstring, "a new seed must say what of its design it left out, and why"
    assert inspect_program(program).has_feedback == (name == "memrl")


class Toolkit:
    """What a seed's toolkit LLM calls may get back."""

    def __init__(self, kind: str):
        self.kind = kind
        self.offline = OfflineBackend()

    def __call__(self, messages):
        if self.kind == "fails":
            raise RuntimeError("the endpoint is down")
        if self.kind == "garbage":
            return "}{ %%% SELECT FROM WHERE ;; IF THEN \x00 " * 40
        return self.offline.toolkit_completion(messages)


@pytest.fixture(scope="module")
def synthetic_task():
    return load_task("synthetic", seed=2)


@pytest.mark.parametrize("llm", ["offline", "fails", "garbage"])
@pytest.mark.parametrize("name", NAMES)
def test_every_seed_writes_and_reads_in_a_sandbox_within_the_limits(name, llm, synthetic_task):
    program = source(name)
    info = inspect_program(program)
    backend = OfflineBackend()
    embedder = HashingEmbedder()
    with Sandbox(program, limits=LIMITS, llm=Toolkit(llm), embed=embedder.embed) as sandbox:
        assert sandbox.start().ok
        question = synthetic_task.items[0].question
        empty = sandbox.read(backend.build_query("", info.schema.query, question))
        assert empty.ok, empty.describe()  # reading an empty memory is no error
        # enough writes that the periodic and merging operations (rule induction, event merges) happen
        for text in synthetic_task.texts[:60]:
            outcome = sandbox.write(backend.extract_item("", info.schema.knowledge_item, text.text), text.text)
            assert outcome.ok, outcome.describe()
            assert outcome.llm_calls <= 1
        contexts = []
        for q in synthetic_task.items[:6]:
            outcome = sandbox.read(backend.build_query("", info.schema.query, q.question))
            assert outcome.ok, outcome.describe()  # the sandbox refuses > 1 LLM call or > 3,000 characters
            assert outcome.llm_calls <= 1
            contexts.append(outcome.value)
        assert any(contexts), "a seed with 60 texts stored returned nothing for six questions"


def test_the_offline_reflector_mutates_every_seed(synthetic_task):
    population = [source(name) for name in NAMES]
    for name in NAMES:
        for rng_seed in range(3):
            child = propose(source(name), population, random.Random(rng_seed))
            assert child.source != source(name) and check_source(child.source) == [], (name, child.kind)


# --------------------------------------------------------------------------------------------------
# SelfMem: the model writes SQL, and that SQL can only read
# --------------------------------------------------------------------------------------------------

HOSTILE_SQL = [  # (what the model replies, what the read returns: the keyword fallback, or the harmless result)
    ("DELETE FROM turns", "fallback"),
    ("DROP TABLE turns", "fallback"),
    ("UPDATE turns SET content = 'overwritten'", "fallback"),
    ("WITH x AS (SELECT 1) DELETE FROM turns", "fallback"),
    ("```sql\nPRAGMA query_only = OFF\n```", "fallback"),
    ("SELECT 1; DELETE FROM turns", "1"),  # one statement only: the first
    ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r", "fallback"),
    ("SELECT randomblob(1500000000)", "fallback"),
    ("SELECT count(*) FROM turns a, turns b, turns c, turns d, turns e, turns f", "fallback"),  # step budget
    ("SELECT load_extension('/tmp/evil.so')", "fallback"),
    ("SELECT * FROM turns WHERE content = (SELECT writefile('x', 'y'))", "fallback"),
    ("SELECT name FROM pragma_table_info('turns')", "fallback"),
]


def test_selfmem_runs_the_model_query_read_only_whatever_it_says():
    replies = iter([sql for sql, _ in HOSTILE_SQL] + ["SELECT count(*), sum(char_count) FROM turns"])
    texts = [f"[{day} May 2024] Ana: note number {day} about the garden" for day in range(1, 21)]
    with Sandbox(source("selfmem"), limits=LIMITS, llm=lambda messages: next(replies)) as sandbox:
        assert sandbox.start().ok
        for text in texts:
            assert sandbox.write({"speaker": "Ana", "time_anchor": "", "note": ""}, text).ok
        query = {"question": "what about the garden", "keywords": ["garden"]}
        for sql, expected in HOSTILE_SQL:
            outcome = sandbox.read(query)
            # refused, failed or stopped: the program goes on, with the keyword search's rows
            assert outcome.ok and outcome.llm_calls == 1, (sql, outcome.describe())
            if expected == "fallback":
                assert "about the garden" in outcome.value, sql
            else:
                assert outcome.value == expected, sql
        counted = sandbox.read(query)
    expected = f"{len(texts)} | {sum(len(t.split(': ', 1)[1]) for t in texts)}"
    assert counted.ok and counted.value == expected, counted.value  # every turn still there, unchanged


# --------------------------------------------------------------------------------------------------
# naming seeds: library names and paths, from any folder
# --------------------------------------------------------------------------------------------------


def config_file(folder: Path, seeds: list[str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    search = {"max_candidates": 1} | ({"seeds": seeds} if seeds is not None else {})
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump({"task": {"name": "synthetic"}, "search": search}))
    return path


def test_the_default_seeds_are_the_paper_seeds_from_any_folder(tmp_path, monkeypatch):
    path = config_file(tmp_path / "configs")
    monkeypatch.chdir(tmp_path)  # neither the checkout nor the config's folder
    resolved = resolve_seeds(load_run_config(path), path)
    assert resolved == [library.entry(name).path for name in library.PAPER_SEEDS]


def test_names_relative_and_absolute_paths_resolve(tmp_path, monkeypatch):
    configs, elsewhere = tmp_path / "configs", tmp_path / "elsewhere"
    (configs / "mine").mkdir(parents=True)
    (configs / "mine" / "beside.py").write_text(source("memrl"))
    elsewhere.mkdir()
    (elsewhere / "from_cwd.py").write_text(source("rulemem"))
    absolute = tmp_path / "absolute.py"
    absolute.write_text(source("grounding"))
    path = config_file(configs, ["selfmem", "mine/beside.py", "from_cwd.py", str(absolute)])
    monkeypatch.chdir(elsewhere)
    resolved = resolve_seeds(load_run_config(path), path)
    assert resolved == [library.entry("selfmem").path, configs / "mine" / "beside.py",
                        elsewhere / "from_cwd.py", absolute]


def test_the_config_folder_wins_over_the_working_directory(tmp_path, monkeypatch):
    configs = tmp_path / "configs"
    path = config_file(configs, ["seed.py"])
    (configs / "seed.py").write_text(source("memskill"))
    (tmp_path / "seed.py").write_text(source("memforest"))
    monkeypatch.chdir(tmp_path)
    assert resolve_seeds(load_run_config(path), path) == [configs / "seed.py"]


def test_unknown_names_and_missing_files_are_all_reported_with_the_valid_names(tmp_path):
    path = config_file(tmp_path, ["vector_search", "memrI", "nowhere/seed.py"])
    with pytest.raises(ConfigError) as caught:
        resolve_seeds(load_run_config(path), path)
    message = str(caught.value)
    assert "search.seeds" in message and "'memrI'" in message and "nowhere/seed.py not found" in message
    assert all(name in message for name in NAMES)


def test_a_seed_that_breaks_the_contract_is_refused_with_rule_and_line(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text(source("memrl").replace("import math\n", "import math\nimport os\n"))
    path = config_file(tmp_path, ["vector_search", "broken.py"])
    with pytest.raises(SeedsBreakContract) as caught:
        resolve_seeds(load_run_config(path), path)
    line = source("memrl").splitlines().index("import math") + 2
    assert f"search.seeds[1]: broken.py breaks the memory-program contract" in str(caught.value)
    assert f"broken.py:line {line}: [import] import of 'os' is not allowed" in str(caught.value)


def test_mstar_ray_run_refuses_to_start_on_a_bad_seed(tmp_path, capsys):
    hostile = config_file(tmp_path / "a", [str(HOSTILE / "import_ctypes.py")])
    unknown = config_file(tmp_path / "b", ["no_such_seed"])
    assert main(["run", str(hostile), "--run-dir", str(tmp_path / "run-a")]) == 1
    assert "[import]" in capsys.readouterr().err
    assert main(["run", str(unknown), "--run-dir", str(tmp_path / "run-b")]) == 2
    err = capsys.readouterr().err
    assert "unknown seed 'no_such_seed'" in err and "selfmem" in err
    assert not (tmp_path / "run-a").exists() and not (tmp_path / "run-b").exists()


def test_a_run_started_with_seed_paths_before_the_library_still_resumes():
    stored = RunConfig.model_validate({"search": {"seeds": [f"seeds/{n}.py" for n in library.PAPER_SEEDS]}})
    merged = merge_resume_config(stored, RunConfig.model_validate({"search": {"max_candidates": 40}}))
    assert merged.search.max_candidates == 40
    with pytest.raises(ConfigError, match="search.seeds"):
        merge_resume_config(stored, RunConfig.model_validate({"search": {"seeds": ["selfmem"]}}))


def test_the_seeds_command_lists_the_library_and_prints_a_seed(capsys):
    assert main(["seeds"]) == 0
    listing = capsys.readouterr().out
    for seed in library.LIBRARY:
        assert seed.name in listing and seed.source in listing
    assert "vector_search*" in listing and "FocusMem" in listing and "TMEM" in listing
    assert main(["seeds", "selfmem"]) == 0
    assert capsys.readouterr().out == source("selfmem")
    assert main(["seeds", "nope"]) == 2
    assert "selfmem" in capsys.readouterr().err
