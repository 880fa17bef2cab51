"""Deprecated public names keep working for one minor release, with a DeprecationWarning."""

from __future__ import annotations

import warnings

import pytest

from elastic_idl._errors import deprecated


def test_deprecated_names_the_new_way_and_points_at_the_callers_caller() -> None:
    def shim() -> None:
        deprecated("ei.old", "ei.new")

    with pytest.warns(DeprecationWarning, match=r"ei\.old is deprecated .* use ei\.new") as record:
        shim()
    assert record[0].filename == __file__


def test_deprecated_is_an_error_when_warnings_are_errors() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DeprecationWarning):
            deprecated("a", "b")
