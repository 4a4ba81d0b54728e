"""The reflector registry: every kind is one module satisfying the protocol, and the config, the actor and the
policy learn what they need of a kind from it (no branch on a kind's name elsewhere)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from mstar_ray.exit_codes import InputError
from mstar_ray.llm.settings import LLMSettings
from mstar_ray.reflect.base import ReflectorSetup
from mstar_ray.reflect.registry import REFLECTOR_NAMES, make_reflector, reflector_class
from mstar_ray.run_config import RunConfig

ROOT = Path(__file__).resolve().parents[1] / "mstar_ray"


@pytest.mark.parametrize("name", REFLECTOR_NAMES)
def test_each_kind_names_itself_and_has_its_traits(name: str) -> None:
    cls = reflector_class(name)
    assert cls.name == name
    assert isinstance(cls.needs_model, bool) and isinstance(cls.fixes_runtime, bool)
    assert callable(getattr(cls, "reflect")) and callable(getattr(cls, "rewrite_guidance"))


@pytest.mark.parametrize("name", [n for n in REFLECTOR_NAMES if not reflector_class(n).needs_model])
def test_a_kind_without_a_model_is_built_from_the_setup_alone(name: str) -> None:
    made = make_reflector(name, ReflectorSetup(LLMSettings(), max_repairs=2))
    assert type(made) is reflector_class(name) and made.max_repairs == 2


def test_the_config_knows_the_kinds_and_which_need_a_model() -> None:
    for name in REFLECTOR_NAMES:
        if reflector_class(name).needs_model:
            with pytest.raises(ValidationError, match=f"search.reflector is '{name}' but llm.reflector is not configured"):
                RunConfig.model_validate({"search": {"reflector": name}})
        else:
            assert RunConfig.model_validate({"search": {"reflector": name}}).search.reflector == name
    with pytest.raises(ValidationError, match="offline-random"):  # the error lists the kinds
        RunConfig.model_validate({"search": {"reflector": "nonesuch"}})
    with pytest.raises(InputError, match="unknown reflector 'nonesuch'"):
        reflector_class("nonesuch")


def test_no_module_outside_the_registry_branches_on_a_kind_name() -> None:
    branch = re.compile(r"""reflector\s*[!=]=\s*["'](llm|offline|offline-random)["']|kind\s*==\s*["']llm["']""")
    found = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py") if branch.search(p.read_text(encoding="utf-8"))]
    assert found == []
