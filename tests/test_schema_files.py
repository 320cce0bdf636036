"""Every schema of schemas/ is a valid schema of the draft it names (pipeline/schemas.py
compiles them without checking, once per process), and so is each definition a config
file may hold alone."""

from __future__ import annotations

import json

import jsonschema
import pytest

from pipeline.schemas import CHECKOUT, definition_validator, validator

NAMES = sorted(path.name.removesuffix(".schema.json") for path in CHECKOUT.glob("*.schema.json"))


@pytest.mark.parametrize("name", NAMES)
def test_each_schema_is_valid_against_its_metaschema(name: str) -> None:
    schema = json.loads((CHECKOUT / f"{name}.schema.json").read_text(encoding="utf-8"))
    jsonschema.validators.validator_for(schema).check_schema(schema)
    assert validator(name).schema == schema


@pytest.mark.parametrize("definition", ["mapping", "curation"])
def test_the_definitions_read_alone_are_valid(definition: str) -> None:
    found = definition_validator("pipeline-config", definition)
    type(found).check_schema(found.schema)
