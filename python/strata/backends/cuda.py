"""strata.backends.cuda (torch.backends.cuda): matmul.allow_tf32 is Strata's set_allow_tf32."""
from strata import _C


class _Matmul:
    _allow_tf32 = False

    @property
    def allow_tf32(self):
        return _Matmul._allow_tf32

    @allow_tf32.setter
    def allow_tf32(self, value):
        _C.set_allow_tf32(bool(value))
        _Matmul._allow_tf32 = bool(value)


matmul = _Matmul()

