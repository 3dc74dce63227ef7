"""torch.nn.utils.rnn: padding a batch of sequences to one length. Packed sequences are not implemented: Strata's
recurrent layers take padded batches."""
import strata
from strata.nn import functional as F


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Sequences [L_i, *] padded with padding_value to the longest: [L, B, *], or [B, L, *] with batch_first."""
    if padding_side not in ("right", "left"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}")
    sequences = list(sequences)
    if not sequences:
        raise ValueError("pad_sequence: received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        widths = [0, 0] * (s.dim() - 1) + ([0, missing] if padding_side == "right" else [missing, 0])
        padded.append(F.pad(s, tuple(widths), value=padding_value) if missing else s)
    return strata.stack(padded, 0 if batch_first else 1)


def _not_implemented(name):
    def function(*args, **kwargs):
        raise NotImplementedError(f"torch.nn.utils.rnn.{name} (packed sequences) is not implemented; pad the batch "
                                  "with pad_sequence and pass it to the recurrent layer as it is")

    function.__name__ = name
    return function


pack_padded_sequence = _not_implemented("pack_padded_sequence")
pad_packed_sequence = _not_implemented("pad_packed_sequence")
pack_sequence = _not_implemented("pack_sequence")
