"""Users' models: every source (.pt2, TorchScript, factory + config + weights) and every refusal."""

from __future__ import annotations

import json
import random

import pytest
import torch
from safetensors.torch import save_file
from structlog.testing import capture_logs

from worker.core.errors import ModelError
from worker.models import load_model
from worker.models.runner import TorchRunner

ROWS = [[0.1 * i + j for j in range(8)] for i in range(5)]


class Net(torch.nn.Module):
    """8 numbers in, 2 out; ``hidden`` comes from the model config."""

    def __init__(self, hidden: int = 4) -> None:
        super().__init__()
        self.first = torch.nn.Linear(8, hidden)
        self.second = torch.nn.Linear(hidden, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x)))


class Mixed(torch.nn.Module):
    """Numbers and a categorical id through an embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.plan = torch.nn.Embedding(5, 3)
        self.out = torch.nn.Linear(7, 1)

    def forward(self, numbers: torch.Tensor, plan: torch.Tensor) -> torch.Tensor:
        return self.out(torch.cat([numbers, self.plan(plan)], dim=1))


def build(hidden: int = 4) -> torch.nn.Module:
    torch.manual_seed(0)
    return Net(hidden)


def build_unguessable() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Conv1d(1, 2, 3), torch.nn.Flatten())


def scores(model, rows) -> list:
    runner = TorchRunner(model, "cpu")
    outcomes = runner.run([model.prepare(row) for row in rows])
    assert all(o.ok for o in outcomes), [o.error_message for o in outcomes if not o.ok]
    return [o.output for o in outcomes]


def flat(rows) -> list[float]:
    return [value for row in rows for value in row]


def write_config(path, config) -> str:
    path.write_text(json.dumps(config))
    return str(path)


def test_a_pt2_program_is_served_by_its_signature_with_any_width(tmp_path):
    net = build().eval()
    batch = torch.export.Dim("batch", min=1)
    program = torch.export.export(net, (torch.randn(2, 8),), dynamic_shapes={"x": {0: batch}})
    torch.export.save(program, str(tmp_path / "net.pt2"))
    model = load_model(str(tmp_path / "net.pt2"))
    assert model.describe()["inputs"] == {"kind": "vector", "length": 8}
    expected = net(torch.tensor(ROWS)).tolist()
    assert flat(scores(model, ROWS)) == pytest.approx(flat(expected), abs=1e-6)
    assert len(model.version) == 12


def test_a_pt2_program_with_several_inputs_takes_an_object_of_them(tmp_path):
    mixed = Mixed().eval()
    batch = torch.export.Dim("batch", min=1)
    program = torch.export.export(mixed, (torch.randn(2, 4), torch.tensor([1, 2])),
                                  dynamic_shapes={"numbers": {0: batch}, "plan": {0: batch}})
    torch.export.save(program, str(tmp_path / "mixed.pt2"))
    config = write_config(tmp_path / "mixed.json", {"outputs": {"names": ["score"]}})
    model = load_model(str(tmp_path / "mixed.pt2"), config)
    assert [t["name"] for t in model.describe()["inputs"]["tensors"]] == ["numbers", "plan"]
    requests = [{"numbers": [1.0, 2.0, 3.0, 4.0], "plan": 3}, {"numbers": [0.0, 0.5, 0.0, 1.0], "plan": 0}]
    expected = mixed(torch.tensor([r["numbers"] for r in requests]), torch.tensor([r["plan"] for r in requests]))
    assert [s["score"] for s in scores(model, requests)] == pytest.approx(expected.squeeze(1).tolist(), abs=1e-6)


def test_a_pt2_program_with_a_static_batch_says_how_to_export_it(tmp_path):
    program = torch.export.export(build().eval(), (torch.randn(2, 8),))
    torch.export.save(program, str(tmp_path / "static.pt2"))
    with pytest.raises(ModelError, match=r"batch dimension \(dim 0\) of input 'x' is static.*dynamic_shapes"):
        load_model(str(tmp_path / "static.pt2"))


def test_torchscript_with_declared_fields_and_named_outputs(tmp_path):
    torch.jit.script(build()).save(str(tmp_path / "net.pt"))
    fields = [f"f{i}" for i in range(8)]
    config = write_config(tmp_path / "net.json", {"inputs": {"kind": "fields", "fields": fields},
                                                  "outputs": {"names": ["low", "high"]}})
    model = load_model(str(tmp_path / "net.pt"), config)
    replies = scores(model, [dict(zip(fields, row, strict=True)) for row in ROWS])
    expected = build().eval()(torch.tensor(ROWS)).tolist()
    assert flat([r["low"], r["high"]] for r in replies) == pytest.approx(flat(expected), abs=1e-6)


def test_a_programs_model_config_refuses_a_key_it_would_ignore_naming_the_closest(tmp_path):
    torch.jit.script(build()).save(str(tmp_path / "net.pt"))
    batch = torch.export.Dim("batch", min=1)
    program = torch.export.export(build().eval(), (torch.randn(2, 8),), dynamic_shapes={"x": {0: batch}})
    torch.export.save(program, str(tmp_path / "net.pt2"))
    typo = write_config(tmp_path / "typo.json", {"output": {"names": ["low", "high"]}})
    for model, kind in (("net.pt", "TorchScript program"), ("net.pt2", "torch.export program")):
        with pytest.raises(ModelError, match=f"has a key 'output', which a {kind} does not take \\(did you mean "
                                             "'outputs'\\?\\)"):
            load_model(str(tmp_path / model), typo)
    with pytest.raises(ModelError, match="key 'hidden'.*its keys: inputs, outputs"):
        load_model(str(tmp_path / "net.pt2"), write_config(tmp_path / "kwarg.json", {"hidden": 4}))


def test_a_model_whose_inputs_cannot_be_read_or_guessed_must_declare_them(tmp_path):
    torch.jit.script(build_unguessable()).save(str(tmp_path / "net.ts"))
    with pytest.raises(ModelError, match="cannot be guessed: declare them in --model-config"):
        load_model(str(tmp_path / "net.ts"))


def test_a_factory_gets_the_config_keys_and_strictly_matching_safetensors_weights(tmp_path):
    trained = build(hidden=6)
    with torch.no_grad():
        for parameter in trained.parameters():
            parameter.add_(1.0)  # weights the factory alone would not have
    save_file(trained.state_dict(), str(tmp_path / "net.safetensors"))
    config = write_config(tmp_path / "net.json", {"hidden": 6, "inputs": {"kind": "vector", "length": 8}})
    model = load_model("tests.unit.test_model_loading:build", config, str(tmp_path / "net.safetensors"))
    assert flat(scores(model, ROWS)) == pytest.approx(flat(trained.eval()(torch.tensor(ROWS)).tolist()), abs=1e-6)


def test_a_state_dict_saved_with_torch_save_loads_without_unpickling_code(tmp_path):
    trained = build()
    torch.save(trained.state_dict(), str(tmp_path / "net.pt"))
    model = load_model("tests.unit.test_model_loading:build", weights=str(tmp_path / "net.pt"))
    expected = trained.eval()(torch.tensor(ROWS[:2])).tolist()
    assert flat(scores(model, ROWS[:2])) == pytest.approx(flat(expected), abs=1e-6)


def test_a_factory_module_with_no_weights_file_and_no_version_is_logged_at_load(tmp_path):
    config = write_config(tmp_path / "net.json", {"inputs": {"kind": "vector", "length": 8}})
    with capture_logs() as logs:
        load_model("tests.unit.test_model_loading:build", config)
        load_model("tests.unit.test_model_loading:build", config, str(save_weights(tmp_path)))
        load_model("tests.unit.test_model_loading:build", config, version="given-in-its-table")
    assert [entry["event"] for entry in logs if entry["log_level"] == "warning"] == ["model_weights_unversioned"]


def save_weights(tmp_path) -> object:
    path = tmp_path / "net.safetensors"
    save_file(build().state_dict(), str(path))
    return path


def test_weights_that_do_not_match_name_the_missing_and_unexpected_keys(tmp_path):
    state = build().state_dict()
    state["extra.weight"] = state.pop("second.weight")
    save_file(state, str(tmp_path / "wrong.safetensors"))
    with pytest.raises(ModelError, match=r"missing keys second\.weight; unexpected keys extra\.weight"):
        load_model("tests.unit.test_model_loading:build", weights=str(tmp_path / "wrong.safetensors"))


def test_weights_of_another_shape_are_refused_with_the_reason(tmp_path):
    save_file(build(hidden=6).state_dict(), str(tmp_path / "wide.safetensors"))
    with pytest.raises(ModelError, match="do not fit.*size mismatch"):
        load_model("tests.unit.test_model_loading:build", weights=str(tmp_path / "wide.safetensors"))


def test_a_pickled_whole_module_is_refused_unless_allowed(tmp_path):
    torch.save(build(), str(tmp_path / "whole.pt"))
    with pytest.raises(ModelError, match="pickled Python object.*refused.*--allow-pickle"):
        load_model(str(tmp_path / "whole.pt"))
    model = load_model(str(tmp_path / "whole.pt"), allow_pickle=True)
    assert len(scores(model, ROWS[:1])) == 1


def test_a_whole_model_given_as_weights_says_to_serve_it_as_the_model(tmp_path):
    torch.jit.save(torch.jit.script(build()), str(tmp_path / "net.pt"))
    with pytest.raises(ModelError, match=r"is a TorchScript model, a whole model, not weights: serve it as --model"):
        load_model("tests.unit.test_model_loading:build", weights=str(tmp_path / "net.pt"))
    program = torch.export.export(build().eval(), (torch.randn(2, 8),))
    torch.export.save(program, str(tmp_path / "net.pt2"))
    with pytest.raises(ModelError, match=r"is a torch.export program, a whole model, not weights"):
        load_model("tests.unit.test_model_loading:build", weights=str(tmp_path / "net.pt2"))


def test_a_state_dict_given_as_the_model_says_to_use_a_factory(tmp_path):
    torch.save(build().state_dict(), str(tmp_path / "weights.pt"))
    with pytest.raises(ModelError, match="holds weights.*--weights"):
        load_model(str(tmp_path / "weights.pt"))


@pytest.mark.parametrize("config, message", [
    ({"unknown": 1}, "does not take the config's keys"),
    ({"inputs": {"kind": "pixels"}}, "inputs.kind must be one of"),
    ({"inputs": {"kind": "vector", "length": 0}}, "inputs.length must be a positive integer"),
    ({"inputs": {"kind": "tensors", "tensors": [{"name": "x", "dtype": "float64", "shape": [8]}]}},
     "dtype must be one of float32, int64, bool"),
    ({"outputs": {"names": ["a"], "labels": ["b"]}}, "both names and labels"),
    ({"inputs": {"kind": "vector", "lenght": 8}}, r"inputs of kind vector take no key 'lenght' \(did you mean "
                                                  r"'length'\?\)"),
    ({"inputs": {"kind": "vector", "length": 8}, "outputs": {"nmaes": ["a"]}}, "outputs take no key 'nmaes'"),
    ({"inputs": "vector"}, r"inputs must be a table of keys \(\[inputs\] with kind = ...\); got string"),
    ({"inputs": {"kind": "vector", "length": 8}, "outputs": ["a"]}, "outputs must be a table of keys"),
    ({"inputs": {"kind": "tensors", "tensors": ["x"]}}, r"inputs.tensors\[0\] must be a table"),
    ({"inputs": {"kind": "tensors", "tensors": [{"dtype": "int64"}]}}, r"inputs.tensors\[0\].name must be"),
    ({"inputs": {"kind": "tensors", "tensors": [{"name": "plan", "dtype": "int64", "hgh": 5}]}},
     r"inputs.tensors' tables take no key 'hgh' \(did you mean 'high'\?\)"),
    ({"inputs": {"kind": "tensors", "tensors": [{"name": "x"}, {"name": "x"}]}}, "inputs.tensors names 'x' twice"),
    ({"inputs": {"kind": "fields", "fields": ["a", "a", "b", "c", "d", "e", "f", "g"]}},
     "inputs.fields names 'a' twice"),
    ({"inputs": {"kind": "vector", "length": 8}, "outputs": {"labels": ["a", "b"], "softmax": "no"}},
     "outputs.softmax must be true or false; got 'no'"),
    ({"inputs": {"kind": "vector", "length": 8}, "outputs": {"names": ["a", "b"], "top_k": 1}},
     "outputs.top_k applies to labels, and this config declares none"),
])
def test_bad_model_configs_name_the_key(tmp_path, config, message):
    with pytest.raises(ModelError, match=message):
        load_model("tests.unit.test_model_loading:build", write_config(tmp_path / "bad.json", config))


def test_a_toml_config_and_a_broken_one(tmp_path):
    good = tmp_path / "model.toml"
    good.write_text('hidden = 3\n[inputs]\nkind = "vector"\nlength = 8\n')
    assert load_model("tests.unit.test_model_loading:build", str(good)).module.first.out_features == 3
    broken = tmp_path / "broken.toml"
    broken.write_text("hidden = \n")
    with pytest.raises(ModelError, match="not valid TOML"):
        load_model("tests.unit.test_model_loading:build", str(broken))


def test_a_spec_that_does_not_fit_the_model_fails_warmup_with_the_shapes(tmp_path):
    config = write_config(tmp_path / "net.json", {"inputs": {"kind": "vector", "length": 16}})
    runner = TorchRunner(load_model("tests.unit.test_model_loading:build", config), "cpu")
    with pytest.raises(ModelError, match=r"failed on its warmup batch.*\(64, 16\) float32.*64x16 and 8x4.*"
                                         r"Declare the inputs the model really takes"):
        runner.warmup(64)


def test_outputs_that_do_not_fit_the_model_fail_warmup_asking_for_the_outputs(tmp_path):
    config = write_config(tmp_path / "net.json", {"inputs": {"kind": "vector", "length": 8},
                                                  "outputs": {"names": ["a", "b", "c"]}})
    runner = TorchRunner(load_model("tests.unit.test_model_loading:build", config), "cpu")
    with pytest.raises(ModelError, match=r"output spec \{'names': \['a', 'b', 'c'\]\}.*has 2 values per item.*"
                                         r"Declare the outputs the model really returns"):
        runner.warmup(64)


def test_built_in_models_take_no_config_or_weights(tmp_path):
    with pytest.raises(ModelError, match="takes no --model-config or --weights"):
        load_model("churn", weights=str(tmp_path / "w.safetensors"))


def test_sample_inputs_follow_the_spec():
    model = load_model("tests.unit.test_model_loading:build")
    sample = model.sample_inputs(random.Random(0))
    assert len(sample) == 8 and model.prepare(sample) == sample


@pytest.mark.parametrize("option", ["model", "weights"])
def test_a_file_torch_did_not_write_is_named_as_such(tmp_path, option):
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ModelError, match="is not a file torch.save or TorchScript wrote"):
        if option == "model":
            load_model(str(junk))
        else:
            load_model("tests.unit.test_model_loading:build", weights=str(junk))


class Tokens(torch.nn.Module):
    """Token ids and their mask, of any length: what a ``sequence`` spec feeds."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(100, 4)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return (self.embed(ids) * mask.unsqueeze(2)).sum(dim=1)


def test_a_pt2_program_of_token_ids_is_served_by_its_declared_sequence_inputs(tmp_path):
    batch, length = torch.export.Dim("batch", min=1), torch.export.Dim("length", min=1, max=64)
    program = torch.export.export(Tokens().eval(), (torch.randint(0, 100, (3, 5)), torch.ones(3, 5, dtype=torch.bool)),
                                  dynamic_shapes=({0: batch, 1: length}, {0: batch, 1: length}))
    torch.export.save(program, str(tmp_path / "tokens.pt2"))
    with pytest.raises(ModelError, match="dynamic dimension besides the batch"):
        load_model(str(tmp_path / "tokens.pt2"))
    config = write_config(tmp_path / "tokens.json", {"inputs": {"kind": "sequence", "max_length": 64, "high": 100}})
    with capture_logs() as logs:
        model = load_model(str(tmp_path / "tokens.pt2"), config)
    [declared] = [e for e in logs if e["event"] == "inputs_declared_over_signature"]
    assert "dynamic dimension besides the batch" in declared["signature"]
    TorchRunner(model, "cpu").warmup(8)
    assert len(scores(model, [[1, 2, 3], [4]])) == 2


def export_by_keyword(path) -> torch.nn.Module:
    """Save Mixed, exported with its two inputs as keyword arguments, at ``path``; returns the module."""
    mixed = Mixed().eval()
    batch = torch.export.Dim("batch", min=1)
    program = torch.export.export(mixed, (), kwargs={"numbers": torch.randn(2, 4), "plan": torch.tensor([1, 2])},
                                  dynamic_shapes={"numbers": {0: batch}, "plan": {0: batch}})
    torch.export.save(program, str(path))
    return mixed


def test_a_pt2_program_exported_with_keyword_arguments_is_called_with_them(tmp_path):
    mixed = export_by_keyword(tmp_path / "keyword.pt2")
    model = load_model(str(tmp_path / "keyword.pt2"))
    assert model.describe()["inputs"]["call"] == "keyword"
    request = {"numbers": [1.0, 2.0, 3.0, 4.0], "plan": 3}
    expected = mixed(torch.tensor([request["numbers"]]), torch.tensor([request["plan"]])).squeeze(1).tolist()
    assert flat(scores(model, [request])) == pytest.approx(expected, abs=1e-6)


class DictOut(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> dict:
        return {"score": x.sum(dim=1)}


def build_dict_out() -> torch.nn.Module:
    return DictOut()


def test_a_model_returning_a_dict_fails_warmup_asking_for_a_factory_that_splits_it(tmp_path):
    config = write_config(tmp_path / "net.json", {"inputs": {"kind": "vector", "length": 8}})
    runner = TorchRunner(load_model("tests.unit.test_model_loading:build_dict_out", config), "cpu")
    with pytest.raises(ModelError, match=r"returned dict.*a factory whose Servable splits it"):
        runner.warmup(64)


class SamplesItRefuses:
    """A Servable whose own sample inputs its prepare refuses."""

    name, version = "refusing", "1"
    module = torch.nn.Identity()

    def prepare(self, inputs):
        return inputs["values"]

    def collate(self, items):
        return torch.tensor(items)

    def split(self, output):
        return output.tolist()

    def sample_inputs(self, rng):
        return [rng.random()]


def test_a_model_that_cannot_prepare_its_own_sample_inputs_fails_warmup_naming_it():
    with pytest.raises(ModelError, match=r"model refusing failed to prepare its own sample inputs in warmup: "
                                         r"TypeError: list indices must be integers"):
        TorchRunner(SamplesItRefuses(), "cpu").warmup(64)


def test_softmax_false_beside_names_is_taken_as_it_changes_nothing(tmp_path):
    config = write_config(tmp_path / "net.json", {"inputs": {"kind": "vector", "length": 8},
                                                  "outputs": {"names": ["a", "b"], "softmax": False}})
    assert load_model("tests.unit.test_model_loading:build", config).describe()["outputs"] == {"names": ["a", "b"]}


def test_declared_inputs_of_a_pt2_exported_with_kwargs_are_passed_by_keyword_or_refused(tmp_path):
    mixed = export_by_keyword(tmp_path / "keyword.pt2")
    tensors = {"kind": "tensors", "tensors": [{"name": "numbers", "shape": [4]},
                                              {"name": "plan", "dtype": "int64", "high": 5}]}
    model = load_model(str(tmp_path / "keyword.pt2"), write_config(tmp_path / "t.json", {"inputs": tensors}))
    assert model.describe()["inputs"]["call"] == "keyword"
    request = {"numbers": [1.0, 2.0, 3.0, 4.0], "plan": 3}
    expected = mixed(torch.tensor([request["numbers"]]), torch.tensor([request["plan"]])).squeeze(1).tolist()
    assert flat(scores(model, [request])) == pytest.approx(expected, abs=1e-6)
    positional = write_config(tmp_path / "p.json", {"inputs": {**tensors, "call": "positional"}})
    with pytest.raises(ModelError, match=r"takes its inputs by keyword \(numbers, plan\).*call = \"keyword\""):
        load_model(str(tmp_path / "keyword.pt2"), positional)
