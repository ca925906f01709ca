"""bench/cold_passes.py runs its three ways and refuses what cannot be measured (no broker: the model only)."""

from bench import cold_passes
from bench.cold_passes import main


def test_it_prints_each_way_per_item(capsys, monkeypatch):
    monkeypatch.setattr(cold_passes, "configure_logging", lambda **_: None)  # the session's logging stays as it is
    assert main(["--passes", "16", "--repeats", "1", "--sweep-mb", "1", "--run", "4", "--batch-size", "8"]) == 0
    out = capsys.readouterr().out.splitlines()
    out = out[next(i for i, line in enumerate(out) if line.startswith("churn, batches of 8")):]  # past any log
    ways = [line.split()[0] for line in out[1:]]
    assert ways == ["warm,", "cold,", "a"]
    assert all(float(line.split()[-1]) > 0 for line in out[1:])


def test_a_count_below_one_is_refused_naming_the_flags(capsys):
    assert main(["--run", "0"]) == 2
    assert "--run" in capsys.readouterr().err
