"""Recurrent layers (torch.nn.RNN, LSTM, GRU and their cells) composed from matrix products and gates, with
PyTorch's parameter names, shapes, gate order and initialisation, so that state dicts and results match PyTorch's.
The input projection of every time step is one product; the recurrence is a Python loop over the steps."""
import math

import strata
from strata.nn import functional as F
from strata.nn import init
from strata.nn.module import Module, Parameter

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _cell(mode, x_proj, h, c, w_hh, b_hh):
    """One step: x_proj is x W_ih^T + b_ih; returns (h', c')."""
    h_proj = F.linear(h, w_hh, b_hh)
    if mode == "LSTM":
        i, f, g, o = (x_proj + h_proj).chunk(4, -1)
        c = strata.sigmoid(f) * c + strata.sigmoid(i) * strata.tanh(g)
        return strata.sigmoid(o) * strata.tanh(c), c
    if mode == "GRU":
        xr, xz, xn = x_proj.chunk(3, -1)
        hr, hz, hn = h_proj.chunk(3, -1)
        r, z = strata.sigmoid(xr + hr), strata.sigmoid(xz + hz)
        n = strata.tanh(xn + r * hn)
        return (1 - z) * n + z * h, None
    pre = x_proj + h_proj
    return (strata.tanh(pre) if mode == "RNN_TANH" else strata.relu(pre)), None


class _RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if proj_size:
            raise NotImplementedError("LSTM proj_size (torch.nn.LSTM's projections) is not implemented; add a "
                                      "nn.Linear after the LSTM instead")
        if not 0 <= dropout <= 1:
            raise ValueError(f"dropout should be a number in range [0, 1], got {dropout}")
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError(f"hidden_size ({hidden_size}) and num_layers ({num_layers}) must be positive")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout, self.bidirectional = bias, batch_first, dropout, bidirectional
        directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        options = dict(dtype=dtype or strata.float32, device=device)
        self._flat_weights_names = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, hidden_size))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                for name, shape in shapes:
                    setattr(self, name + suffix, Parameter(strata.empty(*shape, **options)))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _weights(self, layer, direction):
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        get = lambda name: getattr(self, name + suffix) if self.bias or name.startswith("weight") else None  # noqa
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh")

    def forward(self, input, hx=None):
        if not isinstance(input, strata.Tensor):
            raise NotImplementedError(f"{type(self).__name__}: packed sequences (torch.nn.utils.rnn) are not "
                                      "implemented; pad the batch to one length instead")
        if input.dim() not in (2, 3):
            raise ValueError(f"{type(self).__name__}: expected input to be 2D or 3D, got {input.dim()}D instead")
        unbatched = input.dim() == 2
        x = input.unsqueeze(1) if unbatched else (input.transpose(0, 1) if self.batch_first else input)
        steps, batch = x.shape[0], x.shape[1]
        directions = 2 if self.bidirectional else 1
        lstm = self.mode == "LSTM"
        h0, c0 = (hx if lstm else (hx, None)) if hx is not None else (None, None)
        if h0 is not None and unbatched:
            h0, c0 = h0.unsqueeze(1), (c0.unsqueeze(1) if c0 is not None else None)
        state_shape = (self.num_layers * directions, batch, self.hidden_size)
        if h0 is not None and tuple(h0.shape) != state_shape:
            raise ValueError(f"{type(self).__name__}: expected hidden size {state_shape}, got {tuple(h0.shape)}")
        zeros = strata.zeros(*state_shape, dtype=x.dtype, device=x.device)
        h0 = zeros if h0 is None else h0
        c0 = zeros if lstm and c0 is None else c0
        last_h, last_c = [], []
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, direction)
                k = layer * directions + direction
                h, c = h0[k], (c0[k] if lstm else None)
                x_proj = F.linear(x, w_ih, b_ih)
                order = range(steps - 1, -1, -1) if direction else range(steps)
                out = [None] * steps
                for t in order:
                    h, c = _cell(self.mode, x_proj[t], h, c, w_hh, b_hh)
                    out[t] = h
                outputs.append(strata.stack(out, 0))
                last_h.append(h)
                last_c.append(c)
            x = strata.cat(outputs, 2) if directions == 2 else outputs[0]
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        h_n = strata.stack(last_h, 0)
        output = x.squeeze(1) if unbatched else (x.transpose(0, 1) if self.batch_first else x)
        if unbatched:
            h_n = h_n.squeeze(1)
        if not lstm:
            return output, h_n
        c_n = strata.stack(last_c, 0)
        return output, (h_n, c_n.squeeze(1) if unbatched else c_n)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.batch_first:
            s += ", batch_first=True"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(_RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, device=device, dtype=dtype)


class LSTM(_RNNBase):
    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(_RNNBase):
    def __init__(self, *args, **kwargs):
        super().__init__("GRU", *args, **kwargs)


class _CellBase(Module):
    def __init__(self, mode, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        self.mode, self.input_size, self.hidden_size, self.bias = mode, input_size, hidden_size, bias
        gate_size = _GATES[mode] * hidden_size
        options = dict(dtype=dtype or strata.float32, device=device)
        self.weight_ih = Parameter(strata.empty(gate_size, input_size, **options))
        self.weight_hh = Parameter(strata.empty(gate_size, hidden_size, **options))
        if bias:
            self.bias_ih = Parameter(strata.empty(gate_size, **options))
            self.bias_hh = Parameter(strata.empty(gate_size, **options))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        bound = 1.0 / math.sqrt(hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"{type(self).__name__}: expected input to be 1D or 2D, got {input.dim()}D instead")
        unbatched = input.dim() == 1
        x = input.unsqueeze(0) if unbatched else input
        lstm = self.mode == "LSTM"
        if hx is None:
            zeros = strata.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)
            h, c = zeros, (zeros if lstm else None)
        else:
            h, c = hx if lstm else (hx, None)
            if unbatched:
                h, c = h.unsqueeze(0), (c.unsqueeze(0) if c is not None else None)
        h, c = _cell(self.mode, F.linear(x, self.weight_ih, self.bias_ih), h, c, self.weight_hh, self.bias_hh)
        if unbatched:
            h, c = h.squeeze(0), (c.squeeze(0) if c is not None else None)
        return (h, c) if lstm else h


class RNNCell(_CellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, bias,
                         device, dtype)


class LSTMCell(_CellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, bias, device, dtype)


class GRUCell(_CellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, bias, device, dtype)
