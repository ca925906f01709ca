"""Every runnable module of bench/ ends with its ``__main__`` guard: a function defined after it does not exist
yet when ``python -m`` runs ``main()`` (bench.cluster's delivery callback once did, and failed at its first run)."""

import ast
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def is_main_guard(node: ast.stmt) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__")


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.py")), ids=lambda path: path.name)
def test_the_main_guard_comes_last(path):
    body = ast.parse(path.read_text()).body
    guards = [i for i, node in enumerate(body) if is_main_guard(node)]
    assert not guards or guards == [len(body) - 1], f"{path.name}: statements after its __main__ guard"
