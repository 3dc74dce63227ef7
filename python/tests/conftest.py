import pytest

import strata

# Every test that a device parameter feeds runs on the CPU and, where CUDA is usable, on the GPU too.
DEVICES = ["cpu"] + (["cuda"] if strata.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param
