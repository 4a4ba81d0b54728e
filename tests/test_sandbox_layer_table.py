"""The layer table's measurement on a few cells whose answer is known: with every layer on nothing gets
through; the Python layers alone stop nothing (they are lint); each kernel layer alone stops the class it
exists for (``scripts/sandbox_layer_table.py`` prints the whole table)."""

from __future__ import annotations

from scripts.sandbox_layer_table import ATTACKS, LAYERS, measure


def only(layer: str) -> tuple[str, frozenset[str]]:
    return f"only {layer}", frozenset(LAYERS) - {layer}


def test_each_layer_alone_stops_its_class_and_the_python_layers_stop_nothing():
    wanted = {"read files outside", "other processes", "exotic system calls"}
    attacks = [a for a in ATTACKS if a.cls in wanted]
    configs = [("all layers", frozenset()), only("python-guards"), only("landlock"), only("jail"),
               only("namespaces"), only("seccomp")]
    results = measure(attacks, configs)
    assert not any(results[(cls, "all layers")] for cls in wanted)
    assert results[("read files outside", "only python-guards")]  # lint: switched off from inside
    assert results[("other processes", "only python-guards")]
    assert not results[("read files outside", "only landlock")]
    assert not results[("read files outside", "only jail")]
    assert not results[("other processes", "only namespaces")]
    assert not results[("exotic system calls", "only seccomp")]
    assert results[("exotic system calls", "only namespaces")]


def test_the_limits_and_the_hosts_own_layers_hold_with_every_layer_on():
    """Issue 27's classes: the task cap, the toolkit request count, terminal escapes, the cache channel."""
    wanted = {"tasks (threads, processes)", "host: toolkit request count", "host: terminal escapes",
              "host: cache channel"}
    attacks = [a for a in ATTACKS if a.cls in wanted]
    assert {a.cls for a in attacks} == wanted
    results = measure(attacks, [("all layers", frozenset())])
    assert not any(results[(cls, "all layers")] for cls in wanted), results


def test_the_host_refuses_what_it_cannot_encode_and_frames_that_would_outrun_its_deadline_with_no_layer_on():
    """The host's own layers (the frame boundary, its linear scan inside the call's deadline) hold whatever the
    kernel's layers are: with every one on and with none."""
    wanted = {"host: strings no encoder takes", "host: frames that outrun the deadline"}
    attacks = [a for a in ATTACKS if a.cls in wanted]
    results = measure(attacks, [("all layers", frozenset()), ("none", frozenset(LAYERS))])
    assert not any(results.values()), results
