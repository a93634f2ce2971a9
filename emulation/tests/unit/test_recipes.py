"""CONTRIBUTING.md's recipes hold: a throwaway scheme, experiment kind and port profile, each added to
a copy of the tree by its checklist's required steps alone (tests/recipes/recipes.py), pass the
checks of `make test` that read their registry. A check that needs a line the checklist does not
name fails here, as does a step whose place in the code has moved (RecipeDrift). The copies are made
in tmp_path; the working tree is never touched. `recipes.py NAME --full` runs every check by hand."""

import importlib.util
import sys
from pathlib import Path

import pytest

RECIPES = Path(__file__).resolve().parents[1] / "recipes" / "recipes.py"
_spec = importlib.util.spec_from_file_location("recipes", RECIPES)
recipes = sys.modules["recipes"] = importlib.util.module_from_spec(_spec)  # its dataclasses look it up there
_spec.loader.exec_module(recipes)


def test_a_kind_added_by_its_checklist_alone_passes_the_tests_that_read_the_kinds_registry(tmp_path):
    recipes.follow("kind", tmp_path / "tree")


def test_a_port_profile_added_by_its_checklist_alone_passes_the_tests_that_read_the_profiles(tmp_path):
    recipes.follow("port", tmp_path / "tree")


@pytest.mark.skipif(recipes.cargo() is None, reason="cargo not found: the scheme's recipe builds cchost "
                                                    "(install Rust: https://rustup.rs)")
def test_a_scheme_added_by_its_checklist_alone_builds_lists_itself_and_passes_the_tests_that_read_the_table(
        tmp_path):
    recipes.follow("scheme", tmp_path / "tree")


def test_a_step_whose_place_in_the_code_moved_says_which_step_and_file(tmp_path):
    copy = recipes.Copy(tmp_path)
    (tmp_path / "f.py").write_text("A = (1, 2)\n")
    with pytest.raises(recipes.RecipeDrift, match=r"step 3: f.py has 0 of 'B = \(', not one"):
        copy.edit("3", "f.py", "B = (", "B = (0, ")
    with pytest.raises(recipes.RecipeDrift, match="step 4: f.py has 0 lines starting 'B = ', not one"):
        copy.insert_above("4", "f.py", "B = ", "class C: ...\n")
