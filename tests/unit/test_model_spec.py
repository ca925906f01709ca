"""The declared input and output spec: validation codes, collation, padding, named and labelled outputs."""

from __future__ import annotations

import random

import numpy
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from worker.core.errors import InvalidInput, ModelError
from worker.models.spec import (
    MAX_MAGNITUDE,
    FieldInputs,
    Outputs,
    SequenceInputs,
    TensorInputs,
    TensorSpec,
    VectorInputs,
    float_rows,
    parse_inputs,
)

MIXED = TensorInputs((TensorSpec("numbers", "float32", (2,)), TensorSpec("plan", "int64", (), high=5),
                      TensorSpec("flags", "bool", (3,))))


@pytest.mark.parametrize("inputs, spec, code, message", [
    ([1, 2], VectorInputs(3), "wrong_input_length", "must have 3 numbers, got 2"),
    ({"a": 1}, VectorInputs(3), "invalid_inputs", "array of 3 numbers"),
    ([1, "x", 3], VectorInputs(3), "invalid_inputs", r"inputs\[1\] must be a number"),
    ([1, float("nan"), 3], VectorInputs(3), "invalid_inputs", r"inputs\[1\] is out of range"),
    ({"tenure": 3}, FieldInputs(("tenure", "price")), "invalid_inputs", "inputs.price is missing"),
    ({"tenure": 3, "price": 1, "age": 2}, FieldInputs(("tenure", "price")), "invalid_inputs",
     "inputs.age is not a field"),
    ({"tenure": True, "price": 1}, FieldInputs(("tenure", "price")), "invalid_inputs",
     "inputs.tenure must be a number, got boolean"),
    ({"numbers": [1, 2], "plan": 5, "flags": [True, False, True]}, MIXED, "invalid_inputs",
     r"inputs.plan must be in \[0, 5\), got 5"),
    ({"numbers": [1, 2, 3], "plan": 1, "flags": [True, False, True]}, MIXED, "wrong_input_length",
     "inputs.numbers must have 2 values, got 3"),
    ({"numbers": [1, 2], "plan": 1, "flags": [1, 0, 1]}, MIXED, "invalid_inputs",
     r"inputs.flags\[0\] must be true or false"),
    ({"numbers": [1, 2], "flags": [True, True, True]}, MIXED, "invalid_inputs", "inputs.plan is missing"),
    ([], SequenceInputs(4), "invalid_inputs", "array of 1 to 4 integers"),
    ([1, 2, 3, 4, 5], SequenceInputs(4), "wrong_input_length", "at most 4 integers, got 5"),
    ([1, -2], SequenceInputs(4), "invalid_inputs", r"inputs\[1\] must be at least 0, got -2"),
])
def test_a_request_that_does_not_fit_gets_a_precise_code_and_message(inputs, spec, code, message):
    with pytest.raises(InvalidInput, match=message) as caught:
        spec.prepare(inputs)
    assert caught.value.code == code


def test_named_fields_are_placed_by_name_whatever_their_order():
    spec = FieldInputs(("tenure", "price"))
    batch = spec.collate([spec.prepare({"price": 9.5, "tenure": 3}), spec.prepare({"tenure": 1, "price": 2})])
    assert batch.args[0].tolist() == [[3.0, 9.5], [1.0, 2.0]]


def test_several_tensors_keep_their_dtypes_and_go_by_position_or_by_name():
    item = MIXED.prepare({"numbers": [1, 2], "plan": 4, "flags": [True, False, True]})
    positional = MIXED.collate([item, item])
    assert [t.dtype for t in positional.args] == [torch.float32, torch.int64, torch.bool]
    assert [tuple(t.shape) for t in positional.args] == [(2, 2), (2,), (2, 3)]
    keyword = TensorInputs(MIXED.tensors, keyword=True).collate([item])
    assert set(keyword.kwargs) == {"numbers", "plan", "flags"} and not keyword.args


def test_sequences_are_padded_per_batch_with_a_mask():
    spec = SequenceInputs(max_length=10, pad_value=0)
    ids, mask = spec.collate([[5, 6, 7], [8]]).args
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert mask.tolist() == [[True, True, True], [True, False, False]]


def test_sample_inputs_are_valid_for_every_kind():
    rng = random.Random(0)
    for spec in (VectorInputs(4), FieldInputs(("a", "b")), MIXED, SequenceInputs(6, high=100)):
        spec.prepare(spec.sample(rng))
        assert parse_inputs(spec.describe(), "config") == spec


def test_outputs_named_labelled_or_as_they_are():
    rows = torch.tensor([[2.0, 0.0, 1.0], [0.0, 3.0, 0.0]])
    assert Outputs().split(rows) == rows.tolist()
    named = Outputs(names=("a", "b", "c")).split(rows)
    assert named[0] == {"a": 2.0, "b": 0.0, "c": 1.0}
    labelled = Outputs(labels=("invoice", "letter", "report"), softmax=True, top_k=2).split(rows)
    assert labelled[0]["label"] == "invoice" and list(labelled[0]["scores"]) == ["invoice", "report"]
    assert labelled[1]["label"] == "letter"
    assert sum(Outputs(labels=("x", "y", "z"), softmax=True).split(rows)[0]["scores"].values()) == pytest.approx(1)


def test_one_name_takes_the_one_value_of_each_row_whatever_its_shape():
    for output in (torch.tensor([0.25, 0.5]), torch.tensor([[0.25], [0.5]])):
        assert Outputs(names=("p",)).split(output) == [{"p": 0.25}, {"p": 0.5}]
    with pytest.raises(ModelError, match="output has 2 values per item, but outputs.names declares 1"):
        Outputs(names=("p",)).split(torch.zeros(4, 2))


def test_an_output_of_another_width_than_declared_is_a_model_error():
    with pytest.raises(ModelError, match="output has 3 values per item, but outputs.names declares 2"):
        Outputs(names=("a", "b")).split(torch.zeros(4, 3))


in_range = st.one_of(st.floats(-MAX_MAGNITUDE, MAX_MAGNITUDE), st.integers(-10**30, 10**30),
                     st.sampled_from([0, -0.0, 5e-324, 1e-45, 3.4028235e38 / 1e9, MAX_MAGNITUDE, -MAX_MAGNITUDE]))


@given(rows=st.integers(1, 4).flatmap(lambda width: st.lists(st.lists(in_range, min_size=width, max_size=width),
                                                             min_size=1, max_size=5)))
def test_float_rows_packs_what_a_float32_array_of_the_rows_holds(rows):
    """Every number a prepare lets through (ints too, subnormals, -0.0) becomes the float32 numpy gives it."""
    packed = float_rows(rows, len(rows[0]))
    assert packed.shape == (len(rows), len(rows[0])) and packed.dtype == torch.float32
    assert packed.numpy().tobytes() == numpy.array(rows, dtype=numpy.float32).tobytes()


def test_float_rows_refuses_a_row_of_another_width():
    with pytest.raises(ValueError, match=r"rows of \[2, 3\] values where the model takes 3"):
        float_rows([[1.0, 2.0, 3.0], [1.0, 2.0]], 3)
    assert float_rows([], 3).shape == (0, 3)
    assert float_rows([[], []], 0).shape == (2, 0)  # a model of no inputs (an exported program may declare one)
