"""strata.backends: PyTorch's backend switches, where Strata has them (cudnn, cuda.matmul.allow_tf32)."""
from strata.backends import cuda, cudnn  # noqa: F401
