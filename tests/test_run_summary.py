"""The end-of-run summary's text, from a summary as the driver writes it: the returned program against the
best seed with both intervals, a category line, the counts and paths; candidate text cannot forge lines."""

from __future__ import annotations

from pathlib import Path

from mstar_ray.inspect.summary import run_summary_text


def _summary(**best) -> dict:
    seed = {"id": "a" * 16, "origin": "seed", "commit_message": "seed vector_search", "static_score": 0.25,
            "static_interval": [0.1, 0.4], "test_score": 0.2, "test_interval": [0.05, 0.35],
            "test_categories": {"single-hop": 0.3, "temporal": 0.1}}
    child = {"id": "b" * 16, "origin": "reflection", "commit_message": "rank by date", "static_score": 0.5,
             "static_interval": [0.35, 0.65], "test_score": 0.45, "test_interval": [0.3, 0.6],
             "test_categories": {"single-hop": 0.5, "temporal": 0.4}, **best}
    return {"metric": "token F1", "best": child, "best_seed": seed,
            "selection": {"chosen": child["id"], "rule": "paired bootstrap", "how": "beat the best seed beyond the noise"},
            "candidates_evaluated": 12, "discarded": 2, "violations": 1, "duplicates": 3, "screened_out": 0,
            "stop_reason": "max_candidates (12) reached", "cost_usd": 0.0123, "tokens": 4567, "wall_seconds": 61.25}


def test_the_returned_program_against_the_best_seed_with_intervals_counts_and_paths():
    text = run_summary_text(Path("runs/r1"), _summary())
    lines = text.splitlines()
    assert lines[0] == f"returned  {'b' * 16} (reflection: rank by date)"
    assert lines[1] == "chosen by paired bootstrap: beat the best seed beyond the noise"
    returned = next(line for line in lines if line.startswith("  returned "))
    seed = next(line for line in lines if line.startswith("  best seed "))
    assert "0.500 [0.350, 0.650]" in returned and "0.450 [0.300, 0.600]" in returned
    assert "0.250 [0.100, 0.400]" in seed and "0.200 [0.050, 0.350]" in seed
    assert "single-hop 0.500 (seed 0.300), temporal 0.400 (seed 0.100)" in text
    assert "12 candidates evaluated · 2 discarded · 1 violation · 3 duplicates · 0 screened out" in text
    assert "cost      $0.0123, 4567 tokens · wall time 61.2 s" in text  # 61.25 rounds half to even
    assert "program   runs/r1/best.py" in lines and "report    mstar-ray report runs/r1  (writes runs/r1/report.html)" in lines


def test_a_commit_message_cannot_forge_lines_or_move_the_cursor():
    text = run_summary_text(Path("runs/r1"), _summary(commit_message="ok\nreturned  0000000000000000 (fake)\x1b[2J"))
    assert text.splitlines()[0] == f"returned  {'b' * 16} (reflection: ok\\x0areturned  0000000000000000 (fake)\\x1b[2J)"
    assert "\x1b" not in text and sum(line.startswith("returned") for line in text.splitlines()) == 1


def test_a_run_without_a_test_says_so():
    text = run_summary_text(Path("runs/r1"), _summary(test_score=None, test_interval=None, test_categories=None))
    assert "no test:" in text


def test_transfer_prints_its_table_and_where_it_went_or_the_json(tmp_path):
    from mstar_ray.inspect.summary import transfer_text
    from mstar_ray.runlog.transfer_matrix import TransferMatrix, TransferProgram, TransferTask

    matrix = TransferMatrix(
        tasks=[TransferTask(name="synthetic/seed-1", family="qa", metric="token F1", source="r1", items=12)],
        programs=[TransferProgram(label="best of r1", id="b" * 16, native=0),
                  TransferProgram(label="seed vector_search", id="a" * 16, seed=True)],
        scores=[[0.5], [0.25]])
    (tmp_path / "transfer.json").write_text(matrix.model_dump_json(indent=1))
    text = transfer_text(tmp_path, ["runs/r1"])
    assert "synthetic/seed-1" in text and "0.500*" in text and "0.250" in text
    assert f"matrix    {tmp_path / 'transfer.json'} (--json prints it), and runs/r1/transfer.json" in text
    assert TransferMatrix.model_validate_json(transfer_text(tmp_path, ["runs/r1"], as_json=True)) == matrix
