"""The documentation pages generated from the code, never written by hand: the run-config reference (walked from
the pydantic models, whatever their shape), the CLI reference (from the argparse parser) and the seed library
(from its catalogue). A mkdocs hook (``on_files``) adds them to the site at build time; run as a script it prints
one page (``python scripts/docs_pages.py config|cli|seeds``)."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import inspect
import json
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass

import annotated_types
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

PAGES = {"reference/config.md": "config", "reference/cli.md": "cli", "seeds.md": "seeds"}


@dataclass
class Key:
    path: str
    type: str
    default: str
    description: str
    valid: str


def _models(annotation) -> list[tuple[type[BaseModel], str]]:
    """The models inside an annotation, each with the suffix its keys take: ``[i]`` in a list, ``.NAME`` in a
    dict's values; a union of models gives each of them."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, "")]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (list, tuple, set, frozenset):
        return [(m, "[i]" + s) for a in args for m, s in _models(a)]
    if origin is dict and len(args) == 2:
        return [(m, ".NAME" + s) for m, s in _models(args[1])]
    return [found for a in args for found in _models(a)]


def type_name(annotation) -> str:
    if annotation is type(None):
        return "none"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return "one of the values"
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in args)
    if origin in (list, tuple, set, frozenset):
        return f"list of {type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"map of {type_name(args[0])} to {type_name(args[1])}" if args else "map"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of the values"
    return getattr(annotation, "__name__", str(annotation))


def _literals(annotation) -> list:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return [v for a in args for v in (_literals(a) if typing.get_origin(a) is typing.Literal else [a])]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [m.value for m in annotation]
    return [v for a in args for v in _literals(a)]


CONSTRAINTS = {annotated_types.Gt: "> {}", annotated_types.Ge: ">= {}", annotated_types.Lt: "< {}",
               annotated_types.Le: "<= {}", annotated_types.MinLen: "at least {} entries",
               annotated_types.MaxLen: "at most {} long"}


def valid_values(field) -> str:
    parts = []
    literals = _literals(field.annotation)
    if literals:
        parts.append(", ".join(f"`{v}`" for v in literals))
    for item in field.metadata:
        for kind, text in CONSTRAINTS.items():
            if isinstance(item, kind):
                parts.append(text.format(getattr(item, dataclasses.fields(item)[0].name)))
        pattern = getattr(item, "pattern", None)
        if pattern:
            parts.append(f"matches `{pattern}`")
    return "; ".join(parts)


def _value(value) -> str:
    if isinstance(value, BaseModel):
        return "(section)"
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None:
        return "none"
    if isinstance(value, (dict, list, tuple)) and not value:
        return "empty"
    return f"`{json.dumps(value, default=str)}`"


def default_of(field) -> str:
    if field.default_factory is not None:
        return _value(field.default_factory())
    if field.default is PydanticUndefined:
        return "required"
    return _value(field.default)


def _doc(model: type[BaseModel]) -> str:
    own = model.__dict__.get("__doc__")
    return " ".join(inspect.cleandoc(own).split()) if own else ""


def keys(model: type[BaseModel], prefix: str = "") -> Iterator[Key]:
    """Every key of ``model`` and of the models inside it, depth first, in declaration order."""
    for name, field in model.model_fields.items():
        path = f"{prefix}.{name}" if prefix else name
        nested = _models(field.annotation)
        description = field.description or (_doc(nested[0][0]) if len(nested) == 1 else "")
        yield Key(path, type_name(field.annotation), default_of(field), description, valid_values(field))
        for sub, suffix in nested:
            yield from keys(sub, path + suffix)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def config_page() -> str:
    from mstar_ray.run_config import RunConfig

    lines = ["# Configuration reference", "",
             "Generated at build time from the pydantic models that read a run config "
             "(`mstar_ray.run_config.RunConfig`): the keys, types, defaults and descriptions below are the ones "
             "`mstar-ray run` checks, and a bad value's error quotes the key's description from this page. An unknown "
             "key is refused with the nearest valid one, naming its path (exit 2).", "",
             "`[i]` stands for an entry of a list, `NAME` for a key of a map.", ""]
    for section, field in RunConfig.model_fields.items():
        lines += [f"## `{section}`", ""]
        nested = _models(field.annotation)
        doc = field.description or (_doc(nested[0][0]) if nested else "")
        if doc:
            lines += [doc, ""]
        # A section that is a union (the task: one options model per task) gets a table per member.
        for model, _ in nested[:1] if len(nested) == 1 else nested:
            if len(nested) > 1:
                lines += [f"### `{section}`: {model.__name__}", "", *([_doc(model), ""] if _doc(model) else [])]
            lines += ["| key | type | default | valid values | description |", "|---|---|---|---|---|"]
            for key in keys(model, section):
                lines.append(f"| `{key.path}` | {_cell(key.type)} | {_cell(key.default)} | {_cell(key.valid)} | "
                             f"{_cell(key.description)} |")
            lines.append("")
    return "\n".join(lines)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            return {name: (sub, helps.get(name) or "") for name, sub in action.choices.items()}
    return {}


def cli_page() -> str:
    from mstar_ray.cli import build_parser
    from mstar_ray.exit_codes import exit_codes_text

    parser = build_parser()
    lines = ["# CLI reference", "", "Generated at build time from `mstar-ray`'s argument parser "
             f"(`mstar_ray.cli.build_parser`). Exit codes: {exit_codes_text()}.", ""]
    for name, (sub, help_text) in _subcommands(parser).items():
        lines += [f"## `mstar-ray {name}`", "", help_text, "", "```text", sub.format_usage().strip(), "```", "",
                  "| argument | default | values | what it does |", "|---|---|---|---|"]
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            names = ", ".join(action.option_strings) or action.metavar or action.dest
            default = "" if action.default in (None, argparse.SUPPRESS, False, []) else f"`{action.default}`"
            if action.required and action.option_strings:
                default = "required"
            choices = ", ".join(f"`{c}`" for c in action.choices) if action.choices else ""
            lines.append(f"| `{names}` | {_cell(default)} | {_cell(choices)} | {_cell(action.help or '')} |")
        lines.append("")
    return "\n".join(lines)


def seeds_page() -> str:
    from mstar_ray import seeds as library

    lines = ["# The seed library", "",
             "Generated at build time from the library's catalogue (`mstar_ray.seeds`). A run config names seeds in "
             "`search.seeds` (library names or paths to program files); `mstar-ray seeds` lists them and "
             "`mstar-ray seeds NAME` prints one. Marked *default*: the population a config that names none starts "
             "from (the paper's three seeds).", "",
             "| name | where the idea comes from | the idea |", "|---|---|---|"]
    for seed in library.LIBRARY:
        mark = " *default*" if seed.name in library.PAPER_SEEDS else ""
        lines.append(f"| `{seed.name}`{mark} | {_cell(seed.source)} | {_cell(seed.idea)} |")
    if library.NOT_SEEDABLE:
        lines += ["", "## Systems with no seed", ""]
        lines += [f"- **{name}**: {why}" for name, why in library.NOT_SEEDABLE.items()]
    lines += ["", "Each program is a file under `mstar_ray/seeds/programs/` (the checkout's `seeds/` links there); "
              "see [your own seed](howto/own-seed.md) to write one.", ""]
    return "\n".join(lines)


GENERATORS = {"config": config_page, "cli": cli_page, "seeds": seeds_page}


def on_files(files, config):
    """mkdocs hook: the generated pages join the site's files (nothing is written into docs/)."""
    from mkdocs.structure.files import File

    for uri, page in PAGES.items():
        files.append(File.generated(config, uri, content=GENERATORS[page]()))
    return files


if __name__ == "__main__":
    print(GENERATORS[sys.argv[1]]())
