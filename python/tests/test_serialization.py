"""strata.save and strata.load: checkpoints as PyTorch's tutorials write them, file objects, and hostile paths and
files (Note [What strata.save writes])."""
import collections
import copy
import io
import os
import pickle
import socket
import stat
import subprocess
import sys
import zipfile

import pytest

import strata


def same(a, b):
    return a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape) and a.tolist() == b.tolist()


# --- many tensors: linear time -----------------------------------------------------------------------------------

def test_two_hundred_thousand_tensors_save_and_load_in_linear_time(tmp_path):
    # Quadratic steps took minutes here (past 20 s for the load alone); linear ones take seconds. The bound is
    # generous, for a loaded machine: it separates the two, and the subprocess keeps a hang from hanging the suite.
    script = f"""
import strata
d = {{f"t{{i}}": strata.full((1,), float(i)) for i in range(200_000)}}
strata.save(d, {str(tmp_path / 'many.safetensors')!r})
back = strata.load({str(tmp_path / 'many.safetensors')!r})
assert len(back) == 200_000 and back["t123456"].item() == 123456.0
"""
    result = subprocess.run([sys.executable, "-c", script], timeout=120, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# --- what may be replaced -----------------------------------------------------------------------------------------

def test_save_refuses_a_fifo_and_leaves_it_a_fifo(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(strata.IOError, match="is a FIFO"):
        strata.save({"w": strata.ones(2)}, fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_save_refuses_a_socket_and_a_directory(tmp_path):
    path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(strata.IOError, match="is a socket"):
            strata.save({"w": strata.ones(2)}, path)
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
    (tmp_path / "dir").mkdir()
    with pytest.raises(strata.IOError, match="is a directory"):
        strata.save({"w": strata.ones(2)}, tmp_path / "dir")


def test_save_through_a_link_to_a_device_is_refused_and_the_link_kept(tmp_path):
    link = tmp_path / "null"
    os.symlink("/dev/null", link)
    with pytest.raises(strata.IOError, match="character device"):
        strata.save({"w": strata.ones(2)}, link)
    assert os.readlink(link) == "/dev/null"
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_save_through_a_link_to_a_file_replaces_the_file_and_keeps_the_link(tmp_path):
    target = tmp_path / "real.safetensors"
    strata.save({"w": strata.zeros(2)}, target)
    link = tmp_path / "link.safetensors"
    os.symlink(target, link)
    strata.save({"w": strata.ones(2)}, link)
    assert os.path.islink(link)
    assert strata.load(target)["w"].tolist() == [1.0, 1.0]


def test_a_nul_in_a_path_is_a_value_error_as_in_open(tmp_path):
    with pytest.raises(ValueError, match="null byte"):
        strata.save({"w": strata.ones(2)}, str(tmp_path / "a\0b"))
    assert not (tmp_path / "a").exists()
    with pytest.raises(ValueError, match="null byte"):
        strata.load(str(tmp_path / "a\0b"))


def test_metadata_larger_than_load_accepts_is_refused_at_save(tmp_path):
    path = tmp_path / "big.safetensors"
    with pytest.raises(ValueError, match="limit of 100000000 bytes"):
        strata.save({"w": strata.ones(2)}, path, metadata={"notes": "x" * 100_000_001})
    assert not path.exists()


# --- messages -----------------------------------------------------------------------------------------------------

def test_a_header_of_invalid_utf8_says_so(tmp_path):
    header = b'{"t\xff":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    path = tmp_path / "bad.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + bytes(4))
    with pytest.raises(strata.IOError, match="not valid UTF-8") as e:
        strata.load(path)
    assert "bad.safetensors" in str(e.value)


def test_a_torch_zip_file_is_named_as_not_safetensors(tmp_path):
    path = tmp_path / "model.pth"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    with pytest.raises(strata.IOError, match="this is not a safetensors file: it looks like a zip archive"):
        strata.load(path)


def test_a_pickle_is_named_as_not_safetensors_and_never_unpickled(tmp_path):
    path = tmp_path / "legacy.pt"
    path.write_bytes(pickle.dumps({"w": [1.0, 2.0]}, protocol=2))
    with pytest.raises(strata.IOError, match="not a safetensors file: it looks like a Python pickle"):
        strata.load(path)


def test_bytes_and_pathlike_paths_work_as_in_open(tmp_path):
    path = tmp_path / "b.safetensors"
    strata.save({"w": strata.ones(3)}, os.fsencode(path))
    assert strata.load(os.fsencode(path))["w"].tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(strata.IOError) as e:
        strata.load(b"/no/such/file")
    assert "'/no/such/file'" in str(e.value) and "b'" not in str(e.value)


def test_anything_else_as_a_file_is_a_type_error():
    with pytest.raises(TypeError, match="got int"):
        strata.save({"w": strata.ones(1)}, 3)
    with pytest.raises(TypeError, match="got list"):
        strata.load([])


# --- file objects -------------------------------------------------------------------------------------------------

def test_save_to_and_load_from_bytesio():
    buffer = io.BytesIO()
    strata.save({"w": strata.arange(4, dtype=strata.float32)}, buffer)
    assert not os.path.exists(repr(buffer))  # the old bug: a file named after the object's repr
    buffer.seek(0)
    assert strata.load(buffer)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_save_to_and_load_from_open_files(tmp_path):
    with open(tmp_path / "f.safetensors", "wb") as f:
        strata.save({"epoch": 2, "w": strata.ones(2)}, f)
    with open(tmp_path / "f.safetensors", "rb") as f:
        back = strata.load(f)
    assert back["epoch"] == 2 and back["w"].tolist() == [1.0, 1.0]


def test_text_mode_files_are_refused_saying_to_open_in_binary_mode(tmp_path):
    with open(tmp_path / "t", "w") as f, pytest.raises(TypeError, match="binary mode"):
        strata.save({"w": strata.ones(1)}, f)
    (tmp_path / "r").write_text("text")
    with open(tmp_path / "r") as f, pytest.raises(TypeError, match="binary mode"):
        strata.load(f)


# --- checkpoints --------------------------------------------------------------------------------------------------

def make_model():
    strata.manual_seed(0)
    return strata.nn.Sequential(strata.nn.Linear(3, 4), strata.nn.ReLU(), strata.nn.Linear(4, 2))


def train_step(model, opt):
    x = strata.ones(5, 3)
    loss = model(x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def test_a_tutorial_checkpoint_round_trips_and_training_resumes_the_same(tmp_path):
    model = make_model()
    opt = strata.optim.Adam(model.parameters(), lr=0.01)
    train_step(model, opt)
    checkpoint = {"epoch": 3, "model_state_dict": model.state_dict(), "optimizer_state_dict": opt.state_dict(),
                  "loss": 0.25, "history": [1.5, 0.75], "shape": (2, 3), "name": "mlp", "best": None,
                  "ok": True}
    strata.save(checkpoint, tmp_path / "ckpt.pt")
    back = strata.load(tmp_path / "ckpt.pt", weights_only=True)
    assert back["epoch"] == 3 and back["loss"] == 0.25 and back["history"] == [1.5, 0.75]
    assert back["shape"] == (2, 3) and back["name"] == "mlp" and back["best"] is None and back["ok"] is True
    assert type(back["epoch"]) is int and type(back["loss"]) is float

    resumed = make_model()
    resumed.load_state_dict(back["model_state_dict"])
    resumed_opt = strata.optim.Adam(resumed.parameters(), lr=0.5)
    resumed_opt.load_state_dict(back["optimizer_state_dict"])
    assert resumed_opt.param_groups[0]["lr"] == 0.01
    train_step(model, opt)
    train_step(resumed, resumed_opt)
    for a, b in zip(model.parameters(), resumed.parameters()):
        assert same(a.detach(), b.detach())


def test_module_and_optimizer_state_dicts_round_trip_alone(tmp_path):
    model = make_model()
    opt = strata.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train_step(model, opt)
    strata.save(opt.state_dict(), tmp_path / "opt.safetensors")
    strata.save(model.state_dict(), tmp_path / "model.safetensors")
    opt_back = strata.load(tmp_path / "opt.safetensors")
    assert sorted(opt_back) == sorted(opt.state_dict())
    for k, v in opt.state_dict().items():
        assert same(opt_back[k], v)
    model_back = strata.load(tmp_path / "model.safetensors")
    for k, v in model.state_dict().items():
        assert same(model_back[k], v)


def test_adam_moments_without_their_step_count_are_refused():
    model = make_model()
    opt = strata.optim.Adam(model.parameters(), lr=0.01)
    train_step(model, opt)
    state = opt.state_dict()
    del state["0.step"]
    fresh = strata.optim.Adam(model.parameters(), lr=0.01)
    with pytest.raises(ValueError, match="no step count: '0.step' is missing"):
        fresh.load_state_dict(state)


def test_types_and_order_are_kept(tmp_path):
    obj = collections.OrderedDict([("b", 1), ("a", {0: "zero", (1, 2): [b"\x00\xff", float("inf")]})])
    obj["dtype"] = strata.bfloat16
    obj["device"] = strata.device("cpu")
    strata.save(obj, tmp_path / "o")
    back = strata.load(tmp_path / "o")
    assert type(back) is collections.OrderedDict and list(back) == ["b", "a", "dtype", "device"]
    assert back["a"] == {0: "zero", (1, 2): [b"\x00\xff", float("inf")]}
    assert back["dtype"] == strata.bfloat16 and back["device"] == strata.device("cpu")


def test_a_tensor_alone_and_shared_tensors(tmp_path):
    t = strata.arange(3, dtype=strata.float32)
    strata.save(t, tmp_path / "t")
    assert same(strata.load(tmp_path / "t"), t)
    strata.save({"a": t, "b": [t]}, tmp_path / "shared")
    back = strata.load(tmp_path / "shared")
    assert back["a"] is back["b"][0]


def test_requires_grad_and_parameters_are_kept(tmp_path):
    p = strata.nn.Parameter(strata.ones(2))
    frozen = strata.nn.Parameter(strata.ones(2), requires_grad=False)
    w = strata.zeros(2, requires_grad=True)
    strata.save({"p": p, "frozen": frozen, "w": w}, tmp_path / "g")
    back = strata.load(tmp_path / "g")
    assert isinstance(back["p"], strata.nn.Parameter) and back["p"].requires_grad
    assert isinstance(back["frozen"], strata.nn.Parameter) and not back["frozen"].requires_grad
    assert back["w"].requires_grad and back["w"].is_leaf


def test_objects_that_are_not_data_are_refused_naming_where_they_are(tmp_path):
    with pytest.raises(TypeError, match=r"\['model'\] is a .*Sequential.*state_dict"):
        strata.save({"model": make_model()}, tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_the_structure_key_is_reserved_and_metadata_still_reads(tmp_path):
    with pytest.raises(ValueError, match="strata.structure"):
        strata.save({"w": strata.ones(1)}, tmp_path / "x", metadata={"strata.structure": "{}"})
    strata.save({"epoch": 1}, tmp_path / "y", metadata={"run": "a"})
    assert strata.load_metadata(tmp_path / "y") == {"run": "a"}


# --- map_location and the other arguments of torch.load ------------------------------------------------------------

@pytest.mark.parametrize("where", ["cpu", strata.device("cpu"), {"cpu": "cpu"}, lambda t, loc: t, None])
def test_map_location_forms(tmp_path, where):
    strata.save({"w": strata.ones(2), "n": 1}, tmp_path / "c")
    back = strata.load(tmp_path / "c", map_location=where)
    assert back["w"].device == strata.device("cpu") and back["n"] == 1


def test_map_location_callable_sees_the_saved_location(tmp_path):
    seen = []
    strata.save({"w": strata.ones(2), "n": 1}, tmp_path / "c")
    strata.load(tmp_path / "c", map_location=lambda t, loc: seen.append(loc))
    assert seen == ["cpu"]


def test_unsupported_arguments_say_so(tmp_path):
    strata.save({"w": strata.ones(1)}, tmp_path / "u")
    with pytest.raises(NotImplementedError, match="mmap"):
        strata.load(tmp_path / "u", mmap=True)
    with pytest.raises(TypeError, match="map_location"):
        strata.load(tmp_path / "u", map_location=3)


# --- pickling and deep copies --------------------------------------------------------------------------------------

def test_deepcopy_copies_the_data_and_keeps_requires_grad():
    t = strata.arange(3, dtype=strata.float32).requires_grad_(True)
    c = copy.deepcopy(t)
    assert c is not t and same(c.detach(), t.detach()) and c.requires_grad and c.is_leaf
    with strata.no_grad():
        c.add_(1)
    assert t.tolist() == [0.0, 1.0, 2.0]


def test_deepcopy_of_a_parameter():
    p = strata.nn.Parameter(strata.ones(2))
    c = copy.deepcopy(p)
    assert isinstance(c, strata.nn.Parameter) and c.requires_grad and c is not p


def test_deepcopy_of_a_non_leaf_is_refused_as_in_pytorch():
    w = strata.ones(2, requires_grad=True)
    with pytest.raises(strata.Error, match="leaves"):
        copy.deepcopy(w * 2)


@pytest.mark.parametrize("dtype", [strata.float32, strata.bfloat16, strata.int64, strata.bool])
def test_pickle_round_trips_tensors(dtype):
    t = strata.tensor([[1, 0], [3, 4]]).to(dtype)
    back = pickle.loads(pickle.dumps(t))
    assert same(back, t)


def test_pickle_keeps_parameters_and_requires_grad():
    p = strata.nn.Parameter(strata.ones(2), requires_grad=False)
    back = pickle.loads(pickle.dumps({"p": p, "w": strata.ones(1, requires_grad=True)}))
    assert isinstance(back["p"], strata.nn.Parameter) and not back["p"].requires_grad
    assert back["w"].requires_grad


@pytest.mark.parametrize("structure", [
    '{"object": {"dtype": "save_file"}}',  # names something in strata._C that is not a dtype
    '{"object": {"tensor": "missing"}}',
    '{"object": {"dict": [[[1], 2]]}}',
    '{"object": {"dict": 5}}',
    '{"object": [1, 2]}',
    '{"object": {"bytes": "%%%"}}',
    '{"object": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "not json",
    '{"no object": 1}',
    '{"format": 99, "object": 1}',
    "[1]",
])
def test_a_hostile_structure_is_an_io_error(tmp_path, structure):
    strata.save_file({"w": strata.ones(1)}, tmp_path / "h", metadata={"strata.structure": structure})
    with pytest.raises(strata.IOError, match="structure"):
        strata.load(tmp_path / "h")


def test_an_error_about_a_path_that_is_not_utf8_keeps_its_message():
    with pytest.raises(OSError) as caught:
        strata.load(b"/no/such/\xff")
    assert "no/such" in str(caught.value) and "\\xff" in str(caught.value)
