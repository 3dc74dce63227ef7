import pytest

import strata


def test_errors_are_python_exceptions_of_the_fitting_kind():
    assert issubclass(strata.Error, RuntimeError)
    assert issubclass(strata.OutOfMemoryError, strata.Error)
    assert issubclass(strata.IndexError, IndexError) and issubclass(strata.IndexError, ValueError)
    assert issubclass(strata.DTypeError, TypeError)
    assert issubclass(strata.ShapeError, ValueError)
    assert issubclass(strata.IOError, OSError)
    assert issubclass(strata.NotImplementedError, NotImplementedError)


def test_an_error_keeps_strata_message():
    with pytest.raises(strata.ShapeError, match=r"\[2, 3\]|2x3|\(2, 3\)"):
        strata.ones(2, 3) @ strata.ones(2, 3)


def test_out_of_memory_under_a_limit():
    strata.empty_cache("cpu")  # a cached block would serve the request without asking for memory under the limit
    strata.set_memory_limit("cpu", 1 << 20)
    try:
        with pytest.raises(strata.OutOfMemoryError, match="limit"):
            strata.empty(1 << 22)
    finally:
        strata.clear_memory_limit("cpu")


def test_cuda_queries_answer_without_a_gpu():
    if strata.cuda.is_available():
        assert strata.cuda.device_count() >= 1 and strata.cuda.get_device_name(0)
    else:
        assert strata.cuda.device_count() == 0
        assert strata.cuda.unavailable_reason() != ""
        with pytest.raises(strata.DeviceUnavailableError):
            strata.ones(2, device="cuda")


def test_memory_statistics_follow_allocations():
    strata.empty_cache()
    before = strata.memory_allocated("cpu")
    t = strata.empty(1 << 20)  # 4 MiB
    assert strata.memory_allocated("cpu") >= before + (4 << 20)
    assert strata.max_memory_allocated("cpu") >= strata.memory_allocated("cpu")
    stats = strata.memory_stats("cpu")
    assert stats["allocated_bytes"]["current"] == strata.memory_allocated("cpu")
    del t
    assert strata.memory_allocated("cpu") == before


def test_transfer_counters_count_device_copies():
    strata.reset_transfer_counters()
    counters = strata.transfer_counters()
    assert counters["host_to_device_copies"] == 0
    if strata.cuda.is_available():
        strata.ones(4).to("cuda")
        assert strata.transfer_counters()["host_to_device_copies"] == 1


def test_devices_lists_the_cpu():
    assert strata.devices()[0] == strata.device("cpu")


def test_save_and_load_safetensors(tmp_path, device):
    path = tmp_path / "t.safetensors"
    tensors = {"a": strata.arange(6, dtype=strata.float32).reshape(2, 3).to(device), "b": strata.tensor([1, 2])}
    strata.save(tensors, path, metadata={"epoch": "3"})
    back = strata.load(path)
    assert back["a"].tolist() == [[0, 1, 2], [3, 4, 5]] and back["b"].dtype == strata.int64
    assert strata.load_metadata(path) == {"epoch": "3"}
    assert strata.load(path, device=device)["a"].device == strata.device(device)


def test_loading_a_bad_file_is_an_os_error(tmp_path):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(b"not a safetensors file")
    with pytest.raises(OSError):
        strata.load(path)
    with pytest.raises(strata.IOError):
        strata.load(tmp_path / "missing.safetensors")
