"""The scaffolding of cases written once against PyTorch's API, so that the same code runs with `torch` and with
`strata`, each returning named arrays (values and gradients); PyTorch's results are recorded once into a JSON file
beside the cases (CI does not install PyTorch 2.15), and the tests compare Strata with them. completeness_cases.py,
transformer_ops_cases.py and attention_cases.py are such sets."""
import json
import pathlib
import sys

import numpy as np


class CaseSet:
    """Cases by name, and the JSON file that holds PyTorch's results for them."""

    def __init__(self, reference_name):
        self.reference = pathlib.Path(__file__).with_name(reference_name)
        self.cases = {}

    def case(self, function):
        """A decorator: function(lib) -> {name: array-like} becomes a case."""
        self.cases[function.__name__] = function
        return function

    def run_all(self, lib):
        return {name: {k: np.asarray(v).tolist() for k, v in f(lib).items()} for name, f in self.cases.items()}

    def recorded(self):
        return json.loads(self.reference.read_text())["cases"]

    def main(self):
        """`python3 <cases>.py --record`, with a Python that has PyTorch: writes the reference file."""
        if sys.argv[1:] != ["--record"]:
            sys.exit(f"usage: {sys.argv[0]} --record (with a Python that has PyTorch)")
        import torch

        self.reference.write_text(json.dumps({"recorded_with": f"torch {torch.__version__}",
                                              "cases": self.run_all(torch)}))
        print(f"wrote {self.reference} ({len(self.cases)} cases)")


def data(*shape, seed=0, scale=1.0):
    """Inputs from NumPy's generator, the same for both libraries."""
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def leaf(lib, array):
    return lib.tensor(array, requires_grad=True)


def assert_matches_pytorch(name, got, expected, rtol=2e-5, atol=2e-6):
    """got: a case's arrays from Strata; expected: PyTorch's recorded ones."""
    got = {k: np.asarray(v) for k, v in got.items()}
    assert sorted(got) == sorted(expected)
    for key, want in expected.items():
        want = np.asarray(want, dtype=got[key].dtype if got[key].dtype != object else None)
        assert got[key].shape == want.shape, f"{name}.{key}: shape {got[key].shape}, PyTorch {want.shape}"
        np.testing.assert_allclose(got[key], want, rtol=rtol, atol=atol, err_msg=f"{name}.{key}")
