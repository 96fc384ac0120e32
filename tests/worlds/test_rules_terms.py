"""``worlds._rules.terms.index_terms``: which filter terms an attribute index serves."""

from __future__ import annotations

import pytest

from worlds._rules.terms import index_terms
from worlds.query import And, AttrRef, Compare, FieldRef, Or

CUSTOMER = Compare(AttrRef("customer"), "=", "c-1")
REGION = Compare(AttrRef("region"), "=", "eu")
WORKFLOW = Compare(FieldRef("workflow"), "=", "orders")


def test_top_level_attribute_equalities_join_the_attributes() -> None:
    assert index_terms({}, And((CUSTOMER, WORKFLOW, REGION))) == (
        {"customer": "c-1", "region": "eu"},
        WORKFLOW,
    )
    assert index_terms({}, CUSTOMER) == ({"customer": "c-1"}, None)


def test_a_key_already_given_and_a_refused_pair_stay_filter_terms() -> None:
    merged, rest = index_terms({"customer": "c-2"}, And((CUSTOMER, REGION, WORKFLOW)))
    assert merged == {"customer": "c-2", "region": "eu"}
    assert rest == And((CUSTOMER, WORKFLOW))
    merged, rest = index_terms({}, REGION, indexable=lambda key, value: key != "region")
    assert (merged, rest) == ({}, REGION)


def test_terms_under_or_and_other_operators_stay_filter_terms() -> None:
    either = Or((CUSTOMER, REGION))
    assert index_terms({}, either) == ({}, either)
    bigger = Compare(AttrRef("total"), ">", 3)
    assert index_terms({}, bigger) == ({}, bigger)


def test_a_malformed_filter_is_refused() -> None:
    with pytest.raises(ValueError):
        index_terms({}, And(()))
