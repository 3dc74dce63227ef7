"""strata.utils: as torch.utils."""
from strata.utils import data  # noqa: F401
