"""strata.backends.cudnn (torch.backends.cudnn). Strata's CUDA plugin runs convolutions with cuDNN, choosing the
algorithm by cuDNN's heuristics for every shape: its results do not depend on earlier calls, so `benchmark` (timing
algorithms on the first call of each shape) and `deterministic` are accepted and change nothing. `enabled = False`
is refused, as Strata has no convolution on the GPU without cuDNN. `allow_tf32` is Strata's set_allow_tf32 (off by
default, which is PyTorch's deterministic-precision setting)."""
import sys
import types

from strata import _C


class _CudnnModule(types.ModuleType):
    benchmark = False
    deterministic = False
    benchmark_limit = 10

    @property
    def enabled(self):
        return True

    @enabled.setter
    def enabled(self, value):
        if not value:
            raise NotImplementedError("strata.backends.cudnn.enabled = False: Strata's GPU convolutions all run on "
                                      "cuDNN; to run without it, run the model on the CPU")

    @property
    def allow_tf32(self):
        return self.__dict__.get("_tf32", False)

    @allow_tf32.setter
    def allow_tf32(self, value):
        _C.set_allow_tf32(bool(value))
        self.__dict__["_tf32"] = bool(value)

    def is_available(self):
        return _C.cuda_is_available()

    def version(self):
        return None


sys.modules[__name__].__class__ = _CudnnModule
