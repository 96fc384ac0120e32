"""``worlds._rules.terms``: which filter terms an attribute index serves, and in which order."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worlds._rules.terms import SELECTIVITY_CAP, index_terms, most_selective_first
from worlds.query import And, AttrRef, Compare, FieldRef, Or
from worlds.types import AttributeValue

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


@given(st.lists(st.integers(min_value=0, max_value=3 * SELECTIVITY_CAP), max_size=6))
def test_most_selective_first_orders_by_capped_count_then_query_order(counts: list[int]) -> None:
    attributes: dict[str, AttributeValue] = {f"k{index}": index for index in range(len(counts))}
    ordered = list(most_selective_first(attributes, counts))
    assert sorted(ordered) == sorted(attributes)
    capped = [min(counts[int(key[1:])], SELECTIVITY_CAP) for key in ordered]
    assert capped == sorted(capped)
    for before, after in itertools.pairwise(ordered):
        if min(counts[int(before[1:])], SELECTIVITY_CAP) == min(
            counts[int(after[1:])], SELECTIVITY_CAP
        ):
            assert int(before[1:]) < int(after[1:])  # ties keep the query's order


def test_most_selective_first_needs_a_count_per_filter() -> None:
    assert most_selective_first({"tenant": "t", "customer": "c"}, [900, 3]) == {
        "customer": "c",
        "tenant": "t",
    }
    with pytest.raises(ValueError):
        most_selective_first({"tenant": "t"}, [1, 2])
